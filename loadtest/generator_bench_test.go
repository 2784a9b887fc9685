package loadtest

import (
	"context"
	"testing"
	"time"

	"github.com/wardenlock/warden/internal/grantserver"
)

// BenchmarkUncontendedGenerator runs the uncontended scenario (256
// workers, the Warden driver and the real client) for one second against a
// server that grants everything at once: the load generator's CPU per lock
// op, the trivial server included (the same in every run), without the
// replicas' share of the machine moving it.
func BenchmarkUncontendedGenerator(b *testing.B) {
	srv := grantserver.Start(b)
	var ops, perOp float64
	for i := 0; i < b.N; i++ {
		d := NewWarden(WardenOptions{Endpoints: []string{srv.Addr()}})
		res, err := Run(context.Background(), d, Config{Scenario: "uncontended", Clients: 256,
			Duration: time.Second, Warmup: 200 * time.Millisecond})
		d.Close()
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Errors) > 0 {
			b.Fatalf("errors: %v", res.Errors)
		}
		// As benchload reports it: the generator's CPU in the measured
		// time over the lock ops counted there.
		perOp += res.Metrics["loadgen_cpu_us_per_lock_op"]
		ops += res.Metrics["lock_ops_per_s"] * res.ElapsedS
	}
	b.ReportMetric(perOp/float64(b.N), "cpu-µs/lock-op")
	b.ReportMetric(ops/float64(b.N), "lock-ops/run")
}
