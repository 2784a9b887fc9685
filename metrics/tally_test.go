package metrics

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/wardenlock/warden/wire"
)

// TestRequestTallies: the request and keepalive counters, kept in atomics,
// report at each collection the cumulative count of every label set that
// was counted, ops and codes without a name under "other", and nothing for
// label sets never counted.
func TestRequestTallies(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	r, err := newRequestMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"))
	if err != nil {
		t.Fatal(err)
	}
	r.observe(wire.OpKeepAlive, wire.OK, time.Millisecond)
	r.observe(wire.OpKeepAlive, wire.OK, time.Millisecond)
	r.observe(wire.OpAcquire, wire.Conflict, time.Millisecond)
	r.observe(wire.Op(maxOp-1), wire.OK, time.Millisecond) // no name: "other"

	ka := wire.OpKeepAlive.String()
	acq, conflict, ok := wire.OpAcquire.String(), codeLabel(wire.Conflict.String()), codeLabel(wire.OK.String())
	want := map[string]map[string]int64{
		"warden.requests":         {ka + "/" + ok: 2, acq + "/" + conflict: 1, "other/other": 1},
		"warden.lease.keepalives": {"/" + ok: 2},
	}
	check := func(round string) {
		t.Helper()
		got := collectSums(t, reader)
		for name, points := range want {
			if len(got[name]) != len(points) {
				t.Errorf("%s: %s reported %v, want %v", round, name, got[name], points)
				continue
			}
			for labels, n := range points {
				if got[name][labels] != n {
					t.Errorf("%s: %s{%s} = %d, want %d", round, name, labels, got[name][labels], n)
				}
			}
		}
	}
	check("first collection")
	r.observe(wire.OpKeepAlive, wire.OK, time.Millisecond)
	want["warden.requests"][ka+"/"+ok] = 3
	want["warden.lease.keepalives"]["/"+ok] = 3
	check("second collection") // cumulative, not reset by the first
}

// collectSums reads every int64 sum as name → "op/code" → value.
func collectSums(t *testing.T, reader *sdkmetric.ManualReader) map[string]map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, isSum := m.Data.(metricdata.Sum[int64])
			if !isSum {
				continue
			}
			if !sum.IsMonotonic || sum.Temporality != metricdata.CumulativeTemporality {
				t.Errorf("%s: monotonic %v, temporality %v; want a cumulative counter", m.Name, sum.IsMonotonic, sum.Temporality)
			}
			points := map[string]int64{}
			for _, dp := range sum.DataPoints {
				op, _ := dp.Attributes.Value(attribute.Key("op"))
				code, _ := dp.Attributes.Value(attribute.Key("code"))
				points[op.AsString()+"/"+code.AsString()] = dp.Value
			}
			out[m.Name] = points
		}
	}
	return out
}
