package linmodel

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/wire"
)

// RunWith drives the register workload on the given clients (workload
// client i uses clients[i]) until ctx ends.
func (w *Register) RunWith(ctx context.Context, clients []*client.Client, seed int64) {
	var wg sync.WaitGroup
	paths := RegisterPaths()
	for id, cl := range clients {
		wg.Add(1)
		go func(id int, cl *client.Client) {
			defer wg.Done()
			w.Client(ctx, id, cl, paths, rand.New(rand.NewSource(seed+int64(id))))
		}(id, cl)
	}
	wg.Wait()
}

// RegisterPaths are the lock-register paths: three namespaces (partitions),
// each with a hierarchy.
func RegisterPaths() []string {
	var out []string
	for r := 0; r < 3; r++ {
		ns := fmt.Sprintf("/reg/r%d", r)
		out = append(out, ns, ns+"/a", ns+"/a/b", ns+"/c")
	}
	return out
}

// Register is the lock-register workload: clients acquire (try), release
// (sometimes with a stale token), read and keep alive, on long-TTL session
// leases that end only by revoke; every operation goes into the history.
type Register struct {
	Clients int
	Rate    time.Duration // pause between one client's operations
	Hist    *History

	errs   sync.Map
	nOps   int
	nUnk   int
	muStat sync.Mutex
}

const regTTL = 600 * time.Second // longer than any run

type regClient struct {
	w     *Register
	id    int
	cl    *client.Client
	lease uint64
	owner string
	held  map[string]uint64 // path → token (as far as this client knows)
	stale []pathToken       // tokens it held once
}

type pathToken struct {
	path  string
	token uint64
}

// Client runs workload client id on cl until ctx ends.
func (w *Register) Client(ctx context.Context, id int, cl *client.Client, paths []string, rng *rand.Rand) {
	rc := &regClient{w: w, id: id, cl: cl, owner: fmt.Sprintf("c%d", id), held: map[string]uint64{}}
	rc.newLease(rng)
	for ctx.Err() == nil {
		p := paths[rng.Intn(len(paths))]
		switch x := rng.Intn(100); {
		case x < 40:
			rc.acquire(ctx, p)
		case x < 62:
			rc.release(ctx, rng)
		case x < 85:
			rc.read(ctx, p)
		case x < 95:
			rc.keepAlive(ctx)
		default:
			rc.revoke(ctx)
			rc.newLease(rng)
		}
		select {
		case <-ctx.Done():
		case <-time.After(w.Rate):
		}
	}
	rc.revoke(context.Background()) // best effort, recorded like any other
}

func (rc *regClient) newLease(rng *rand.Rand) {
	rc.lease = uint64(rng.Int63()) | 1
	rc.held = map[string]uint64{}
}

// opCtx bounds one operation; an operation cut short is "unknown".
func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
}

func (rc *regClient) do(ctx context.Context, in RegInput, req *wire.Request) (*wire.Response, RegOutput) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	call := rc.w.Hist.Call()
	resp, err := rc.cl.Do(octx, req)
	var out RegOutput
	if resp == nil {
		out.Unknown = true
		rc.w.note(err)
	} else {
		out.Code = resp.Code
	}
	if resp != nil && resp.Code == wire.Ambiguous {
		out.Unknown = true
	}
	if resp != nil && !out.Unknown {
		fill(in, resp, &out)
	}
	rc.w.Hist.Add(rc.id, in, call, out)
	rc.w.count(out.Unknown)
	return resp, out
}

func fill(in RegInput, resp *wire.Response, out *RegOutput) {
	switch in.Kind {
	case RegAcquire, RegRelease:
		out.Token, out.Count = resp.Token, uint32(resp.Count)
	case RegRead:
		for _, h := range resp.Holders {
			if h.Path == "" || h.Path == in.Path {
				out.Holder = &RegHold{Lease: h.Lease, Owner: h.Owner, Token: h.Token, Count: h.Count}
			}
		}
	case RegKeepAlive:
		for _, l := range resp.Leases {
			if l == in.Lease {
				out.Gone = true
			}
		}
		if resp.Code != wire.OK && !out.Gone {
			out.Unknown = true // not refreshed, nothing learnt
		}
	}
}

func (rc *regClient) acquire(ctx context.Context, p string) {
	in := RegInput{Kind: RegAcquire, Path: p, Lease: rc.lease, Owner: rc.owner}
	_, out := rc.do(ctx, in, &wire.Request{Op: wire.OpAcquire, Path: p, Lease: rc.lease, Owner: rc.owner,
		TTL: regTTL.Milliseconds(), Wait: wire.WaitNone})
	if !out.Unknown && out.Code == wire.OK {
		rc.held[p] = out.Token
	}
}

func (rc *regClient) release(ctx context.Context, rng *rand.Rand) {
	var pt pathToken
	if len(rc.stale) > 0 && (len(rc.held) == 0 || rng.Intn(4) == 0) {
		pt = rc.stale[rng.Intn(len(rc.stale))] // a late, stale release: must change nothing
	} else {
		for p, t := range rc.held {
			pt = pathToken{p, t}
			break
		}
	}
	if pt.token == 0 {
		return
	}
	in := RegInput{Kind: RegRelease, Path: pt.path, Token: pt.token, Lease: rc.lease, Owner: rc.owner}
	_, out := rc.do(ctx, in, &wire.Request{Op: wire.OpRelease, Path: pt.path, Token: pt.token, Lease: rc.lease, Owner: rc.owner})
	if rc.held[pt.path] == pt.token && (out.Unknown || out.Code == wire.OK && out.Count == 0 || out.Code != wire.OK) {
		delete(rc.held, pt.path)
		rc.stale = append(rc.stale, pt)
		if len(rc.stale) > 16 {
			rc.stale = rc.stale[1:]
		}
	}
}

func (rc *regClient) read(ctx context.Context, p string) {
	rc.do(ctx, RegInput{Kind: RegRead, Path: p}, &wire.Request{Op: wire.OpLockInfo, Path: p})
}

func (rc *regClient) keepAlive(ctx context.Context) {
	rc.do(ctx, RegInput{Kind: RegKeepAlive, Lease: rc.lease}, &wire.Request{Op: wire.OpKeepAlive, Lease: rc.lease, TTL: regTTL.Milliseconds()})
}

func (rc *regClient) revoke(ctx context.Context) {
	rc.do(ctx, RegInput{Kind: RegRevoke, Lease: rc.lease}, &wire.Request{Op: wire.OpRevoke, Lease: rc.lease})
	for p, t := range rc.held {
		rc.stale = append(rc.stale, pathToken{p, t})
	}
	rc.held = map[string]uint64{}
}

func (w *Register) note(err error) {
	if err != nil {
		key := err.Error()
		if len(key) > 120 {
			key = key[:120]
		}
		if errors.Is(err, context.DeadlineExceeded) {
			key = "deadline: " + key
		}
		v, _ := w.errs.LoadOrStore(key, new(int))
		w.muStat.Lock()
		*v.(*int)++
		w.muStat.Unlock()
	}
}

func (w *Register) count(unknown bool) {
	w.muStat.Lock()
	w.nOps++
	if unknown {
		w.nUnk++
	}
	w.muStat.Unlock()
}

// Stats returns the number of operations and of unknown outcomes.
func (w *Register) Stats() (ops, unknown int) {
	w.muStat.Lock()
	defer w.muStat.Unlock()
	return w.nOps, w.nUnk
}
