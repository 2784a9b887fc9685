package loadtest

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histograms count microseconds from 1 µs to 5 minutes with 3 significant
// digits: enough for a fast local acquire and for a stalled waiter alike.
const (
	histMin     = 1
	histMax     = int64(5 * time.Minute / time.Microsecond)
	histDigits  = 3
	coarseDigit = 2 // per-second histograms: smaller, merged often
)

// Hist is a latency histogram in microseconds.
type Hist struct{ h *hdrhistogram.Histogram }

// NewHist returns an empty full-precision histogram.
func NewHist() *Hist { return &Hist{hdrhistogram.New(histMin, histMax, histDigits)} }

func newCoarseHist() *Hist { return &Hist{hdrhistogram.New(histMin, histMax, coarseDigit)} }

// Record adds one latency; values outside the range are clamped, never lost.
func (h *Hist) Record(d time.Duration) {
	us := d.Microseconds()
	if us < histMin {
		us = histMin
	}
	if us > histMax {
		us = histMax
	}
	_ = h.h.RecordValue(us)
}

// Merge adds every value of o.
func (h *Hist) Merge(o *Hist) {
	if o != nil {
		h.h.Merge(o.h)
	}
}

// Count is the number of recorded values.
func (h *Hist) Count() int64 { return h.h.TotalCount() }

// CountOver is the number of recorded values above d (to the histogram's
// precision).
func (h *Hist) CountOver(d time.Duration) int64 {
	var n int64
	limit := d.Microseconds()
	for _, b := range h.h.Distribution() {
		if b.From > limit {
			n += b.Count
		}
	}
	return n
}

// Reset empties the histogram.
func (h *Hist) Reset() { h.h.Reset() }

// Stats summarises a histogram in milliseconds.
type Stats struct {
	Count  int64   `json:"count"`
	Rate   float64 `json:"rate_per_s"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Stats summarises h over a run of length elapsed.
func (h *Hist) Stats(elapsed time.Duration) Stats {
	us := func(v int64) float64 { return float64(v) / 1000 }
	s := Stats{
		Count:  h.h.TotalCount(),
		MeanMs: h.h.Mean() / 1000,
		P50Ms:  us(h.h.ValueAtQuantile(50)),
		P90Ms:  us(h.h.ValueAtQuantile(90)),
		P99Ms:  us(h.h.ValueAtQuantile(99)),
		P999Ms: us(h.h.ValueAtQuantile(99.9)),
		MaxMs:  us(h.h.Max()),
	}
	if elapsed > 0 {
		s.Rate = float64(s.Count) / elapsed.Seconds()
	}
	return s
}

// Percentile returns the q-th percentile in milliseconds.
func (h *Hist) Percentile(q float64) float64 { return float64(h.h.ValueAtQuantile(q)) / 1000 }
