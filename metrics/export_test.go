package metrics

import "github.com/wardenlock/warden/wire"

// ObserveRequest exposes the router hook to the benchmark.
func (m *Metrics) ObserveRequest(op wire.Op, code wire.Code) { m.req.observe(op, code, 1000) }
