package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/wire"
)

// watchRun follows one namespace (one shard) through the faults with the
// client's resuming watch. Checked: revisions strictly increase (ordered,
// no duplicates), and a replay from the first revision after the run holds
// exactly the events delivered live (nothing missed across reconnects).
type watchRun struct {
	mu     sync.Mutex
	events []wire.Event
	errs   []string
}

const watchPrefix = "/reg/r1"

func (w *watchRun) run(ctx context.Context, c *Cluster) error {
	cl, closeCl, err := c.LinkedClient(ctx, "watch", 2, client.WithRequestTimeout(time.Second))
	if err != nil {
		return err
	}
	defer closeCl()
	for wr := range cl.Watch(ctx, watchPrefix, client.WithPrefix()) {
		w.mu.Lock()
		if wr.Err != nil && ctx.Err() == nil {
			w.errs = append(w.errs, wr.Err.Error())
		}
		w.events = append(w.events, wr.Events...)
		w.mu.Unlock()
	}
	return nil
}

func (w *watchRun) check(ctx context.Context, r *Result, c *Cluster) {
	w.mu.Lock()
	evs := append([]wire.Event(nil), w.events...)
	errs := w.errs
	w.mu.Unlock()
	for _, e := range errs {
		r.violate("watch: the stream ended: %s", e)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Rev <= evs[i-1].Rev {
			r.violate("watch: revision %d delivered after %d (out of order or duplicate)", evs[i].Rev, evs[i-1].Rev)
			return
		}
	}
	if len(evs) == 0 {
		r.note("watch: no events")
		return
	}
	first, last := evs[0].Rev, evs[len(evs)-1].Rev
	replay, err := replayWatch(ctx, c, first, last)
	if err != nil {
		r.note("watch: replay unavailable: %v", err)
		return
	}
	if len(replay) != len(evs) {
		r.violate("watch: %d events delivered live between revisions %d and %d, %d in the replay (missed: %s)",
			len(evs), first, last, len(replay), missing(replay, evs))
		return
	}
	for i := range evs {
		if evs[i].Rev != replay[i].Rev || evs[i].Kind != replay[i].Kind || evs[i].Token != replay[i].Token {
			r.violate("watch: event %d differs from the replay: live rev %d kind %d, replay rev %d kind %d",
				i, evs[i].Rev, evs[i].Kind, replay[i].Rev, replay[i].Kind)
			return
		}
	}
	r.note("watch: %d events, ordered, none missed (revisions %d..%d)", len(evs), first, last)
}

func replayWatch(ctx context.Context, c *Cluster, first, last uint64) ([]wire.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cl, err := client.New(ctx, c.ClientAddrs())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []wire.Event
	for wr := range cl.Watch(ctx, watchPrefix, client.WithPrefix(), client.WithRev(first)) {
		if wr.Err != nil {
			return out, wr.Err
		}
		for _, e := range wr.Events {
			if e.Rev <= last {
				out = append(out, e)
			}
			if e.Rev >= last {
				return out, nil
			}
		}
	}
	return out, fmt.Errorf("replay ended before revision %d", last)
}

func missing(all, got []wire.Event) string {
	have := map[uint64]bool{}
	for _, e := range got {
		have[e.Rev] = true
	}
	s := ""
	for _, e := range all {
		if !have[e.Rev] {
			s += fmt.Sprintf("%d ", e.Rev)
			if len(s) > 200 {
				break
			}
		}
	}
	return s
}
