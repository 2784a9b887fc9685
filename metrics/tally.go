package metrics

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"
)

// tally is a counter with a fixed set of label sets, kept in atomics and
// reported when the meter collects (an observable counter). Counting costs
// one atomic add; the SDK's synchronous counter resolves and filters its
// attribute set on every Add, which at one call per request or applied
// event is about 3 % of a leader's CPU.
type tally struct {
	counts []atomic.Int64
	sets   []metric.ObserveOption // nil: the slot is not reported
}

func newTally(slots int) *tally {
	return &tally{counts: make([]atomic.Int64, slots), sets: make([]metric.ObserveOption, slots)}
}

// add counts n at slot i.
func (t *tally) add(i int, n int64) { t.counts[i].Add(n) }

// register makes the tally an observable counter of m. Label sets never
// counted are left out, as a synchronous counter leaves them out.
func (t *tally) register(m metric.Meter, name, unit, desc string) error {
	_, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for i := range t.counts {
				if v := t.counts[i].Load(); v != 0 && t.sets[i] != nil {
					o.Observe(v, t.sets[i])
				}
			}
			return nil
		}))
	return err
}
