package metrics

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/wardenlock/warden/wire"
)

func attrString(k, v string) attribute.KeyValue { return attribute.String(k, v) }

// Ops and codes are small dense integers; every (op, code) attribute set is
// built once here so recording a request allocates nothing new per label.
const (
	maxOp   = 128
	maxCode = 64
)

// requestMetrics counts the requests the router answers.
type requestMetrics struct {
	requests   *tally // slot op*maxCode+code; otherSlot for ops and codes the protocol does not define
	duration   metric.Float64Histogram
	keepalives *tally // slot code
	slow       metric.Int64Counter

	byOp     [maxOp][]metric.RecordOption
	otherRec []metric.RecordOption
}

// otherSlot is the requests tally's slot for ops and codes without a name.
const otherSlot = maxOp * maxCode

// latencyBuckets span 100 µs .. 10 s (a blocking acquire may wait longer; it
// lands in +Inf).
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func newRequestMetrics(m metric.Meter) (*requestMetrics, error) {
	r := &requestMetrics{requests: newTally(otherSlot + 1), keepalives: newTally(maxCode)}
	var err error
	if r.duration, err = m.Float64Histogram("warden.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a request's arrival to its answer, by op (a blocking acquire includes its wait)."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...)); err != nil {
		return nil, err
	}
	if r.slow, err = m.Int64Counter("warden.watch.slow_consumers", metric.WithUnit("{watch}"),
		metric.WithDescription("Watches cut off because their client read too slowly.")); err != nil {
		return nil, err
	}
	for op := 0; op < maxOp; op++ {
		name := wire.Op(op).String()
		if !known(name) {
			continue
		}
		r.byOp[op] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrString("op", name)))}
		for code := 0; code < maxCode; code++ {
			cn := wire.Code(code).String()
			if !known(cn) {
				continue
			}
			r.requests.sets[op*maxCode+code] = metric.WithAttributeSet(attribute.NewSet(attrString("op", name), attrString("code", codeLabel(cn))))
		}
	}
	for code := 0; code < maxCode; code++ {
		if cn := wire.Code(code).String(); known(cn) {
			r.keepalives.sets[code] = metric.WithAttributeSet(attribute.NewSet(attrString("code", codeLabel(cn))))
		}
	}
	r.requests.sets[otherSlot] = metric.WithAttributeSet(attribute.NewSet(attrString("op", "other"), attrString("code", "other")))
	r.otherRec = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrString("op", "other")))}
	if err := r.requests.register(m, "warden.requests", "{request}",
		"Client requests answered by this node's router, by op and result code."); err != nil {
		return nil, err
	}
	if err := r.keepalives.register(m, "warden.lease.keepalives", "{keepalive}",
		"Session keepalives answered, by result code."); err != nil {
		return nil, err
	}
	return r, nil
}

// known: names of the form "op(12)"/"code(40)" are values the protocol does
// not define; they share the "other" label.
func known(name string) bool { return name != "" && name[len(name)-1] != ')' }

// codeLabel turns "not leader" into "not_leader".
func codeLabel(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == ' ' {
			b[i] = '_'
		}
	}
	return string(b)
}

func (r *requestMetrics) observe(op wire.Op, code wire.Code, elapsed time.Duration) {
	slot, rec := otherSlot, r.otherRec
	if int(op) < maxOp && int(code) < maxCode {
		if i := int(op)*maxCode + int(code); r.requests.sets[i] != nil {
			slot, rec = i, r.byOp[op]
		}
	}
	r.requests.add(slot, 1)
	r.duration.Record(context.Background(), elapsed.Seconds(), rec...)
	if op == wire.OpKeepAlive && int(code) < maxCode && r.keepalives.sets[code] != nil {
		r.keepalives.add(int(code), 1)
	}
}

func (r *requestMetrics) slowConsumer() { r.slow.Add(context.Background(), 1) }
