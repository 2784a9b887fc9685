package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// walCollector exports the wal log store's segment syncs and rotations as
// Prometheus histograms and counters, read from the store's own counters
// at scrape time (the store only adds to atomics).
type walCollector struct {
	stats                          WAL
	desc, rotDesc, copied, copiedN *prometheus.Desc
}

func newWALCollector(s WAL) walCollector {
	return walCollector{stats: s,
		desc: prometheus.NewDesc("warden_wal_sync_duration_seconds",
			"Duration of the Raft log store's fdatasyncs of its segments (wal store only; the ones a write waits for).", nil, nil),
		rotDesc: prometheus.NewDesc("warden_wal_rotation_duration_seconds",
			"Duration of the Raft log store's segment rotations, during which every write of the node waits.", nil, nil),
		copied: prometheus.NewDesc("warden_wal_rotation_copied_bytes_total",
			"Live log entry bytes copied forward into new segments at rotation.", nil, nil),
		copiedN: prometheus.NewDesc("warden_wal_rotation_copied_replicas_total",
			"Replicas whose live log entries were copied forward at rotation (once per rotation).", nil, nil),
	}
}

func (c walCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.rotDesc
	ch <- c.copied
	ch <- c.copiedN
}

func (c walCollector) Collect(ch chan<- prometheus.Metric) {
	count, sum, bounds, cum := c.stats.Syncs()
	ch <- prometheus.MustNewConstHistogram(c.desc, count, sum, histogram(bounds, cum))
	rn, rs, rbounds, rcum, copied, copiedN := c.stats.Rotations()
	ch <- prometheus.MustNewConstHistogram(c.rotDesc, rn, rs, histogram(rbounds, rcum))
	ch <- prometheus.MustNewConstMetric(c.copied, prometheus.CounterValue, float64(copied))
	ch <- prometheus.MustNewConstMetric(c.copiedN, prometheus.CounterValue, float64(copiedN))
}

// histogram pairs bounds with their cumulative counts.
func histogram(bounds []float64, cum []uint64) map[float64]uint64 {
	m := make(map[float64]uint64, len(bounds))
	for i, le := range bounds {
		if i < len(cum) {
			m[le] = cum[i]
		}
	}
	return m
}
