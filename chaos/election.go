package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wardenlock/warden/client"
)

// electionRun: candidates campaign, lead briefly and resign; an observer
// follows the leader. Checked: at most one leader per token, and the
// observer never sees the token go down.
type electionRun struct {
	mu       sync.Mutex
	byToken  map[uint64]string
	dups     []string
	observed []uint64
	wins     int
}

const electionPath = "/elect/e0/leader"

func (e *electionRun) run(ctx context.Context, c *Cluster, seed int64) error {
	e.byToken = map[uint64]string{}
	var wg sync.WaitGroup
	for k := 0; k < 3; k++ {
		cl, closeCl, err := c.LinkedClient(ctx, fmt.Sprintf("elect-%d", k), k, client.WithRequestTimeout(time.Second))
		if err != nil {
			return err
		}
		defer closeCl()
		wg.Add(1)
		go func(k int, cl *client.Client) {
			defer wg.Done()
			name := fmt.Sprintf("cand-%d", k)
			for ctx.Err() == nil {
				e.term(ctx, cl, name)
			}
		}(k, cl)
		if k == 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for li := range cl.Observe(ctx, electionPath) {
					e.mu.Lock()
					e.observed = append(e.observed, li.Token)
					e.mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return nil
}

func (e *electionRun) term(ctx context.Context, cl *client.Client, name string) {
	s, err := cl.NewSession(ctx, client.WithTTL(2*time.Second))
	if err != nil {
		sleepCtx(ctx, 100*time.Millisecond)
		return
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.Close(cctx)
		cancel()
	}()
	for ctx.Err() == nil && s.Err() == nil {
		el := client.NewElection(s, electionPath)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := el.Campaign(cctx, []byte(name))
		cancel()
		if err != nil {
			continue
		}
		tok := el.Token()
		if tok == 0 {
			// The session's local deadline passed between the win and
			// this look: the candidate no longer claims to lead.
			continue
		}
		e.mu.Lock()
		e.wins++
		if prev, ok := e.byToken[tok]; ok && prev != name {
			e.dups = append(e.dups, fmt.Sprintf("token %d elected both %s and %s", tok, prev, name))
		}
		e.byToken[tok] = name
		e.mu.Unlock()
		sleepCtx(ctx, 150*time.Millisecond)
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		el.Resign(rctx)
		rcancel()
	}
}

func (e *electionRun) check(r *Result) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.dups {
		r.violate("election: %s", d)
	}
	for i := 1; i < len(e.observed); i++ {
		if e.observed[i] != 0 && e.observed[i] < e.observed[i-1] {
			r.violate("election: observer saw the leader token go down from %d to %d", e.observed[i-1], e.observed[i])
			break
		}
	}
	r.note("election: %d terms, %d leader observations", e.wins, len(e.observed))
}
