package statemachine

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

var (
	seedFlag = flag.Uint64("seed", 0, "replay the randomized tests with this seed (also WARDEN_SEED)")
	longFlag = flag.Bool("long", false, "run the randomized tests much longer (also WARDEN_LONG=1)")
)

// seeds returns the seeds to run: the one asked for, or a few fresh ones.
func seeds(t *testing.T, n int) []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	if v := os.Getenv("WARDEN_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("WARDEN_SEED: %v", err)
		}
		return []uint64{s}
	}
	if *longFlag || os.Getenv("WARDEN_LONG") != "" {
		n *= 50
	}
	base := uint64(time.Now().UnixNano())
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}

var modelPaths = []string{"/a", "/a/b", "/a/b/c", "/a/b/d", "/a/e", "/a/e/j", "/f", "/f/g", "/f/g/h", "/i"}

func modelConfig() Config {
	cfg := testConfig()
	cfg.TombstoneMs = 1500
	cfg.ClientIdleMs = 4000
	return cfg
}

// TestModel applies long random sequences to the state machine and to the
// reference model, comparing every answer and the full lock table after
// every entry; the harness checks the invariants after every entry too.
func TestModel(t *testing.T) {
	for _, seed := range seeds(t, 8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Logf("seed %d (replay with -seed=%d or WARDEN_SEED=%d)", seed, seed, seed)
			runModel(t, seed, 1500)
		})
	}
}

type driver struct {
	rng    *rand.Rand
	h      *harness
	m      *model
	seqs   map[uint64]uint64
	sent   []*wire.Request // earlier requests with a client, for retries
	tokens []uint64        // every token seen, for releases (stale ones too)
	last   map[string]uint64
	codes  map[wire.Code]int
	grants int
}

func runModel(t *testing.T, seed uint64, steps int) {
	cfg := modelConfig()
	d := &driver{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), h: newHarnessWith(t, cfg),
		m: newModel(cfg), seqs: map[uint64]uint64{}, last: map[string]uint64{}, codes: map[wire.Code]int{}}
	d.m.fence = d.h.sm.fence
	for step := 0; step < steps; step++ {
		d.h.now += int64(d.rng.IntN(400))
		ops := make([]*wire.Request, 1+d.rng.IntN(3))
		for i := range ops {
			ops[i] = d.next()
		}
		d.h.events = d.h.events[:0]
		got := d.h.entry(ops...)
		want := d.m.entry(d.h.now, ops)
		for i := range ops {
			d.compare(t, step, ops[i], got[i], want[i])
		}
		d.checkTokens(t, step)
		d.compareTables(t, step)
	}
	t.Logf("outcomes %v, hand-off grants %d", d.codes, d.grants)
	for _, c := range []wire.Code{wire.OK, wire.Queued, wire.Conflict, wire.SelfConflict, wire.StaleToken, wire.NotFound} {
		if d.codes[c] == 0 && steps >= 1000 {
			t.Errorf("the run never produced %v: the generator has drifted", c)
		}
	}
	if d.grants == 0 && steps >= 1000 {
		t.Error("the run never handed a lock off")
	}
}

func (d *driver) next() *wire.Request {
	switch x := d.rng.IntN(100); {
	case x < 40:
		return d.acquire()
	case x < 60:
		tok := d.token()
		path := d.path()
		for _, h := range d.m.holders {
			if h.token == tok && d.rng.IntN(8) > 0 {
				path = h.path // mostly the right path for the token
			}
		}
		return &wire.Request{Op: wire.OpRelease, Path: path, Token: tok}
	case x < 63:
		ttl := int64(5000)
		if d.rng.IntN(4) == 0 {
			ttl = 10
		}
		return &wire.Request{Op: wire.OpRenew, Path: d.path(), Token: d.token(), TTL: ttl}
	case x < 65:
		return &wire.Request{Op: wire.OpRevoke, Lease: d.lease()}
	case x < 68:
		return &wire.Request{Op: wire.OpExpire, Lease: d.lease()}
	case x < 80:
		if len(d.m.waiters) > 0 && d.rng.IntN(3) > 0 {
			w := d.m.waiters[d.rng.IntN(len(d.m.waiters))]
			return cancelReq(w.client, w.seq)
		}
		c := 1 + uint64(d.rng.IntN(3))
		return cancelReq(c, 1+uint64(d.rng.IntN(int(d.seqs[c]+1))))
	case x < 97 && len(d.sent) > 0:
		old := d.sent[len(d.sent)-1-d.rng.IntN(min(len(d.sent), 10))] // a recent one
		cp := *old
		return &cp
	}
	r := d.acquire()
	r.Mode = wire.Mode(2 + d.rng.IntN(3)) // not a mode
	return r
}

func (d *driver) path() string { return modelPaths[d.rng.IntN(len(modelPaths))] }

// lease picks a session lease (1-4) or, for revoke/expire, a single-lock one.
func (d *driver) lease() uint64 {
	if d.rng.IntN(4) == 0 && len(d.tokens) > 0 {
		return SingleLeaseBit | d.tokens[d.rng.IntN(len(d.tokens))]
	}
	return 1 + uint64(d.rng.IntN(4))
}

func (d *driver) token() uint64 {
	if x := d.rng.IntN(10); x < 6 && len(d.m.holders) > 0 {
		return d.m.holders[d.rng.IntN(len(d.m.holders))].token // a live holder
	} else if len(d.tokens) == 0 || x == 6 {
		return uint64(d.rng.IntN(50))
	}
	// Mostly recent tokens: those are the ones that still hold something.
	i := len(d.tokens) - 1 - d.rng.IntN(min(len(d.tokens), 12))
	return d.tokens[i]
}

func (d *driver) acquire() *wire.Request {
	var leaseID uint64
	if d.rng.IntN(5) > 0 {
		leaseID = 1 + uint64(d.rng.IntN(4))
	}
	r := acq(d.path(), wire.Mode(d.rng.IntN(2)), leaseID, []string{"x", "y"}[d.rng.IntN(2)])
	if d.rng.IntN(2) == 0 {
		r.Wait = wire.WaitForever
	}
	if d.rng.IntN(20) == 0 {
		r.TTL = 1 // out of range
	}
	if c := uint64(d.rng.IntN(4)); c > 0 {
		d.seqs[c]++
		r.Client, r.Seq = c, d.seqs[c]
		if d.rng.IntN(8) == 0 && r.Seq > 6 {
			r.AckSeq = r.Seq - 6 // acknowledges older requests, some of which get retried
		}
		d.sent = append(d.sent, r)
	}
	return r
}

func (d *driver) compare(t *testing.T, step int, r *wire.Request, got wire.Response, want mResp) {
	t.Helper()
	if got.Code != want.code || got.Token != want.token || got.Lease != want.lease || got.Count != want.count {
		t.Fatalf("step %d: %v %s mode=%v lease=%d owner=%s token=%d client=%d seq=%d:\n got  %v token=%d lease=%#x count=%d (%s)\n want %v token=%d lease=%#x count=%d",
			step, r.Op, r.Path, r.Mode, r.Lease, r.Owner, r.Token, r.Client, r.Seq,
			got.Code, got.Token, got.Lease, got.Count, got.Msg, want.code, want.token, want.lease, want.count)
	}
	if len(got.Grants) != len(want.grants) {
		t.Fatalf("step %d: %v granted %+v, model granted %+v", step, r.Op, got.Grants, want.grants)
	}
	for i := range want.grants {
		g, w := got.Grants[i], want.grants[i]
		if g.Client != w.Client || g.Seq != w.Seq || g.Token != w.Token || g.Path != w.Path || g.Lease != w.Lease {
			t.Fatalf("step %d: grant %d is %+v, model says %+v", step, i, g, w)
		}
	}
	d.codes[got.Code]++
	d.grants += len(got.Grants)
	if got.Token != 0 {
		d.tokens = append(d.tokens, got.Token)
	}
	for _, g := range got.Grants {
		d.tokens = append(d.tokens, g.Token)
	}
}

// checkTokens: every grant's token is above every earlier one on its path.
func (d *driver) checkTokens(t *testing.T, step int) {
	for _, ev := range d.h.events {
		if ev.Kind != wire.EvAcquired {
			continue
		}
		if ev.Token <= d.last[ev.Path] || ev.Token == 0 {
			t.Fatalf("step %d: token %d on %s does not exceed %d", step, ev.Token, ev.Path, d.last[ev.Path])
		}
		d.last[ev.Path] = ev.Token
	}
}

// compareTables compares holders and queues with the model's.
func (d *driver) compareTables(t *testing.T, step int) {
	var got, want []string
	d.h.sm.trie.Root().Walk(nil, func(n *lockNode) bool {
		forHolders(n, func(h *holder) {
			got = append(got, fmt.Sprintf("H %s %v %d %s %d x%d", n.Path(), h.mode, h.leaseID(), h.owner, h.token, h.count))
		})
		if n.Val.ext != nil {
			for w := n.Val.ext.head; w != nil; w = w.next {
				got = append(got, fmt.Sprintf("W %s %v %d %s c%d s%d", n.Path(), w.mode, w.lease, w.owner, w.client, w.seq))
			}
		}
		return true
	})
	for _, h := range d.m.holders {
		want = append(want, fmt.Sprintf("H %s %v %d %s %d x%d", h.path, h.mode, h.lease, h.owner, h.token, h.count))
	}
	for _, w := range d.m.waiters {
		want = append(want, fmt.Sprintf("W %s %v %d %s c%d s%d", w.path, w.mode, w.lease, w.owner, w.client, w.seq))
	}
	// Holders compare as sets; waiters keep their queue order per path.
	sortTable(got)
	sortTable(want)
	if !slices.Equal(got, want) {
		t.Fatalf("step %d: lock table differs\n got  %v\n want %v", step, got, want)
	}
	if live := len(d.h.sm.leases) + d.h.sm.singles.n; live != len(d.m.leases)+len(d.m.singles) {
		t.Fatalf("step %d: %d live leases, model has %d", step, live, len(d.m.leases)+len(d.m.singles))
	}
	if len(d.h.sm.clients) != len(d.m.clients) {
		t.Fatalf("step %d: %d clients, model has %d", step, len(d.h.sm.clients), len(d.m.clients))
	}
}

// sortTable sorts holder lines fully and waiter lines by path only, keeping
// the queue order of the waiters of one path; holders come first.
func sortTable(v []string) {
	key := func(s string) string {
		if s[0] == 'H' {
			return s
		}
		i := 2
		for i < len(s) && s[i] != ' ' {
			i++
		}
		return s[:i]
	}
	slices.SortStableFunc(v, func(a, b string) int { return strings.Compare(key(a), key(b)) })
}
