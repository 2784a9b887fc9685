package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/admin"
	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/wire"
)

// fixture is a running 3-node cluster with admin ports and known state:
// two locks under /locks/billing (one with a waiter) and an election.
type fixture struct {
	c       *nodetest.Cluster
	cl      *client.Client
	admin   []string // admin addresses by node index
	held    map[string]uint64
	waiter  string
	session wire.HexID
	elected uint64
}

func start(t *testing.T) *fixture {
	t.Helper()
	c := nodetest.Start(t, nodetest.Options{Shards: 2, Edit: func(cfg *node.Config) {
		cfg.AdminAddr = "127.0.0.1:0"
		// Each node reports a CPU reading of its own (the nodes share
		// this process): 10, 20 and 30 % of 2 cores.
		used := 0.2 * float64(cfg.ID)
		cfg.CPU = func() cpuload.Reading { return cpuload.Reading{Used: used, Capacity: 2} }
	}})
	f := &fixture{c: c, held: map[string]uint64{}}
	for _, n := range c.Nodes {
		f.admin = append(f.admin, n.Admin.Addr())
	}
	ctx := ctxT(t, 30*time.Second)
	cl, err := client.New(ctx, c.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	f.cl = cl
	s := session(t, cl)
	f.session = wire.HexID(s.Lease())
	for _, p := range []string{"/locks/billing/job-1", "/locks/billing/job-2"} {
		m := client.NewMutex(s, p, client.WithOwner("worker-a"))
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		f.held[p] = m.Token()
	}
	// A second session queues behind job-1.
	f.waiter = "/locks/billing/job-1"
	other := session(t, cl)
	wctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go client.NewMutex(other, f.waiter, client.WithOwner("worker-b")).Lock(wctx)
	e := client.NewElection(s, "/elections/scheduler/main")
	if err := e.Campaign(ctx, []byte("node-a")); err != nil {
		t.Fatal(err)
	}
	f.elected = e.Token()
	waitFor(t, func() bool {
		info, err := cl.LockInfo(ctx, f.waiter)
		return err == nil && len(info.Waiters) == 1
	})
	return f
}

func session(t *testing.T, cl *client.Client) *client.Session {
	t.Helper()
	s, err := cl.NewSession(ctxT(t, 10*time.Second), client.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 15s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	code, b := fetch(t, http.DefaultClient, "", url)
	return code, string(b)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}

func TestAdminAPI(t *testing.T) {
	f := start(t)
	base := "http://" + f.admin[0]

	t.Run("health", func(t *testing.T) {
		tests := []struct {
			name, path string
			code       int
			want       []string
		}{
			{"livez", "/livez", 200, []string{"ok"}},
			{"livez verbose", "/livez?verbose", 200, []string{"[+]ping ok", "[+]serializable_read ok", "check passed"}},
			{"readyz", "/readyz", 200, []string{"ok"}},
			{"readyz verbose", "/readyz?verbose", 200, []string{"[+]range_table ok", "[+]shard_leaders ok", "[+]applied ok", "[+]disk_writable ok"}},
			{"readyz exclude", "/readyz?verbose&exclude=disk_writable", 200, []string{"[+]disk_writable excluded: ok"}},
			{"one check", "/readyz/shard_leaders", 200, []string{"ok"}},
			{"unknown check", "/readyz/nope", 404, []string{"no such check"}},
			{"healthz alias", "/healthz", 200, []string{"ok"}},
			{"unknown path", "/nope", 404, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				code, body := get(t, base+tt.path)
				if code != tt.code {
					t.Fatalf("status %d, want %d: %s", code, tt.code, body)
				}
				for _, w := range tt.want {
					if !strings.Contains(body, w) {
						t.Errorf("body lacks %q:\n%s", w, body)
					}
				}
			})
		}
	})

	t.Run("status", func(t *testing.T) {
		// A leader being moved (the host balances leaders) is briefly unknown,
		// and node 1's replicas, if followers, may not have applied the
		// fixture's entries yet (Raft commits on a quorum).
		var st admin.Status
		waitFor(t, func() bool {
			getJSON(t, base+"/v1/status", &st)
			locks := 0
			for _, sh := range st.Shards {
				if sh.Leader == 0 || sh.Applied == 0 {
					return false
				}
				locks += sh.Locks
			}
			return locks == 3
		})
		if st.Node != 1 || len(st.Nodes) != 3 || len(st.Shards) != 2 || len(st.Ranges) == 0 {
			t.Fatalf("status: %+v", st)
		}
		locks := 0
		for _, sh := range st.Shards {
			if sh.Leader == 0 || !sh.Local || sh.Applied == 0 {
				t.Errorf("shard %+v: want a leader and a local, applied replica", sh)
			}
			locks += sh.Locks
		}
		if locks != 3 { // two locks and the election
			t.Errorf("locks over shards = %d, want 3", locks)
		}
		// The log store (wal, the default) has synced the entries.
		if ls := st.LogStore; ls == nil || ls.Syncs == 0 {
			t.Errorf("log store status: %+v", ls)
		}
		for _, n := range st.Nodes {
			if n.AdminAddr != f.admin[n.ID-1] {
				t.Errorf("node %d advertises admin %q, want %q", n.ID, n.AdminAddr, f.admin[n.ID-1])
			}
		}
		if st.Version == "" {
			t.Errorf("status names no version")
		}
		// Range bounds are route keys in hex; the ranges cover the key space.
		share := 0.0
		for i, r := range st.Ranges {
			if (r.Start != "" || i > 0) && len(r.Start) != 16 || r.End != "" && len(r.End) != 16 {
				t.Errorf("range %d bounds %q..%q, want 16 hex digits or empty", i, r.Start, r.End)
			}
			share += r.Share
		}
		if share < 0.999 || share > 1.001 {
			t.Errorf("the ranges' shares add up to %v, want 1", share)
		}
		// Every node hears from every other (the first probes take a moment).
		waitFor(t, func() bool {
			getJSON(t, base+"/v1/status", &st)
			for _, n := range st.Nodes {
				if n.State != "up" || n.LastHeard.IsZero() || n.Version == "" {
					return false
				}
			}
			return len(st.Nodes) == 3
		})
	})

	t.Run("locks", func(t *testing.T) {
		// Every node answers the same, whichever shard it leads.
		for i, addr := range f.admin {
			var locks []admin.Lock
			getJSON(t, "http://"+addr+"/v1/locks?prefix=/locks/billing", &locks)
			if len(locks) != 2 {
				t.Fatalf("node %d: %d locks, want 2: %+v", i+1, len(locks), locks)
			}
			for _, l := range locks {
				if l.Token != f.held[l.Path] || l.Mode != "exclusive" || l.Owner != "worker-a" || l.Lease != f.session {
					t.Errorf("node %d: lock %+v, want token %d owner worker-a lease %x", i+1, l, f.held[l.Path], f.session)
				}
				if l.TTLMs <= 0 || l.TTLMs > 10000 {
					t.Errorf("node %d: %s TTL left %d ms, want in (0, 10s]", i+1, l.Path, l.TTLMs)
				}
				wantWaiters := 0
				if l.Path == f.waiter {
					wantWaiters = 1
				}
				if len(l.Waiters) != wantWaiters {
					t.Errorf("node %d: %s has %d waiters, want %d", i+1, l.Path, len(l.Waiters), wantWaiters)
				}
			}
		}
		var all []admin.Lock
		getJSON(t, base+"/v1/locks", &all) // default prefix "/" fans out to every shard
		if len(all) != 3 {
			t.Errorf("locks under /: %d, want 3", len(all))
		}
		code, body := get(t, base+"/v1/locks?prefix=relative")
		if code != http.StatusBadRequest || !strings.Contains(body, "not absolute") {
			t.Errorf("bad prefix: %d %s", code, body)
		}
	})

	t.Run("sessions", func(t *testing.T) {
		var ss []admin.Session
		getJSON(t, base+"/v1/sessions", &ss)
		found := false
		for _, s := range ss {
			if s.ID == f.session {
				found = s.TTLMs == 10000 && len(s.Shards) > 0
			}
		}
		if len(ss) < 2 || !found {
			t.Errorf("sessions %+v: want both sessions, %x with TTL 10s", ss, f.session)
		}
	})

	t.Run("elections", func(t *testing.T) {
		var es []admin.Election
		getJSON(t, base+"/v1/elections?prefix=/elections/scheduler", &es)
		if len(es) != 1 || es[0].Value != "node-a" || es[0].Token != f.elected {
			t.Errorf("elections %+v, want node-a with token %d", es, f.elected)
		}
	})

	t.Run("shards", func(t *testing.T) {
		// Raft commits on a quorum, so a follower may not have applied the
		// fixture's entries when the view is first taken. Poll until every
		// replica reports at least what the leader had applied at the first
		// look; a replica that never catches up fails the test.
		target := map[uint64]uint64{}
		nodetest.WaitFor(t, 15*time.Second, "every replica applying", func() error {
			var ss []router.ShardView
			getJSON(t, base+"/v1/shards", &ss)
			if len(ss) != 2 {
				return fmt.Errorf("shards %+v: want 2", ss)
			}
			for _, s := range ss {
				leaders := 0
				for _, r := range s.Replicas {
					if r.Role == "leader" {
						leaders++
						if target[s.ID] == 0 {
							target[s.ID] = r.Applied
						}
					}
				}
				if len(s.Replicas) != 3 || leaders != 1 || s.Leader == 0 {
					return fmt.Errorf("shard %d: %+v, want 3 replicas and one leader", s.ID, s)
				}
				for _, r := range s.Replicas {
					if r.Error != "" || r.Applied == 0 || r.Applied < target[s.ID] {
						return fmt.Errorf("shard %d replica on node %d: applied %d (leader had %d), error %q",
							s.ID, r.Node, r.Applied, target[s.ID], r.Error)
					}
				}
			}
			return nil
		})
	})

	t.Run("page", func(t *testing.T) {
		code, body := get(t, base+"/?prefix=/locks/billing")
		if code != 200 {
			t.Fatalf("page: %d", code)
		}
		for p, tok := range f.held {
			if !strings.Contains(body, p) || !strings.Contains(body, fmt.Sprintf(`<td class="num token">%d</td>`, tok)) {
				t.Errorf("page lacks %s with token %d", p, tok)
			}
		}
	})
}
