package node_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/admin"
	"github.com/wardenlock/warden/audit"
	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

type step struct {
	kind, owner, cause string
	token              *uint64
}

// TestAuditReconstructsALocksHistory drives one lock through direct grants,
// a release, a queue and hand-off across a leader kill, a revocation and an
// expiry, restarts the killed node, and rebuilds the lock's history from
// every node's audit store: same holders, tokens and causes everywhere.
func TestAuditReconstructsALocksHistory(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Edit: func(cfg *node.Config) {
		cfg.AdminAddr = "127.0.0.1:0"
		cfg.Shard.FeedSize = 4 // the ring forgets at once: watches resume from the store
	}})
	cl := newClient(t, c)
	ctx := ctxT(t, 120*time.Second)
	const p = "/locks/billing/job"
	shardID := mustLocate(t, c, p)

	var t1, t2, t3, t4 uint64
	alice := session(t, cl, 10*time.Second)
	m := client.NewMutex(alice, p, client.WithOwner("alice"))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	t1 = m.Token()
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	bob, err := cl.Acquire(ctx, p, time.Minute, client.WithOwner("bob"))
	if err != nil {
		t.Fatal(err)
	}
	t2 = bob.Token()
	carol, err := cl.NewSession(ctx, client.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	carolLock := client.NewMutex(carol, p, client.WithOwner("carol"))
	granted := make(chan error, 1)
	go func() { granted <- carolLock.Lock(ctx) }()
	waitUntil(t, "carol queued", func() bool {
		info, err := cl.LockInfo(ctx, p)
		return err == nil && len(info.Waiters) == 1
	})

	killed := c.LeaderOf(shardID)
	c.StopNode(killed)
	if err := bob.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatal(err)
	}
	t3 = carolLock.Token()
	if err := carol.Close(ctx); err != nil { // revokes the lease: the lock ends
		t.Fatal(err)
	}
	dave, err := cl.Acquire(ctx, p, time.Second, client.WithOwner("dave")) // never renewed
	if err != nil {
		t.Fatal(err)
	}
	t4 = dave.Token()
	waitUntil(t, "dave's lease to expire", func() bool {
		_, err := cl.LockInfo(ctx, p)
		return errors.Is(err, client.ErrNotFound)
	})
	c.StartNode(killed)

	want := []step{
		{"acquired", "alice", "direct", &t1}, {"released", "alice", "released", &t1},
		{"acquired", "bob", "direct", &t2}, {"queued", "carol", "", nil},
		{"released", "bob", "released", &t2}, {"acquired", "carol", "handoff", &t3},
		{"released", "carol", "revoked", &t3},
		{"acquired", "dave", "direct", &t4}, {"released", "dave", "expired", &t4},
	}
	for i, n := range c.Nodes {
		var got []audit.Record
		waitUntil(t, fmt.Sprintf("node %d's audit trail", i+1), func() bool {
			n.Audit.Sync()
			got, err = n.Audit.Find(audit.Query{Prefix: "/locks/billing"})
			return err == nil && len(got) >= len(want)+4
		})
		checkHistory(t, i+1, got, want)
	}

	// The admin API answers the post-mortem question by token.
	var ans admin.AuditAnswer
	getJSON(t, fmt.Sprintf("http://%s/v1/audit?prefix=/locks/billing&token=%d&since=1h", c.Nodes[killed].Admin.Addr(), t3), &ans)
	if len(ans.Records) != 2 || ans.Records[0].Cause != "handoff" || ans.Records[1].Cause != "revoked" || ans.Records[1].Owner != "carol" {
		t.Fatalf("audit by token %d: %+v", t3, ans.Records)
	}

	// A watch on the restarted node resumes from the first revision: its
	// ring holds 4 events, the rest comes from the store.
	n := c.Nodes[killed]
	s, _ := n.Host.Shard(shardID)
	first := firstRev(t, n, p)
	sub := &collectSub{}
	id, _, err := s.Watch(p, false, first, sub)
	if err != nil {
		t.Fatalf("watch from revision %d after restart: %v", first, err)
	}
	s.Unwatch(id)
	var kinds []string
	for _, ev := range sub.events {
		if ev.Kind != wire.EvLease && ev.Kind != wire.EvLeaseEnd {
			kinds = append(kinds, ev.Kind.String()+"/"+ev.Owner)
		}
	}
	if len(kinds) < len(want) || kinds[0] != "acquired/alice" || kinds[len(want)-1] != "released/dave" {
		t.Fatalf("resumed watch saw %v", kinds)
	}
	// After retention removed that history, the same watch is refused clearly.
	n.Audit.Sweep(time.Now().Add(30 * 24 * time.Hour))
	_, _, err = s.Watch(p, false, first, &collectSub{})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.Compacted || !strings.Contains(we.Detail, "retention") {
		t.Fatalf("watch from a compacted revision: %v", err)
	}
}

func checkHistory(t *testing.T, node int, all []audit.Record, want []step) {
	t.Helper()
	var got []audit.Record // lock events; single-lock leases also log lease and lease-end
	for _, r := range all {
		if r.Kind != "lease" && r.Kind != "lease-end" {
			got = append(got, r)
		}
	}
	var lines []string
	for _, r := range got {
		lines = append(lines, fmt.Sprintf("%s %s %s token=%d", r.Kind, r.Owner, r.Cause, r.Token))
	}
	if len(got) != len(want) {
		t.Fatalf("node %d: %d records, want %d:\n%s", node, len(got), len(want), strings.Join(lines, "\n"))
	}
	for i, w := range want {
		r := got[i]
		if r.Kind != w.kind || r.Owner != w.owner || w.cause != "" && r.Cause != w.cause || w.token != nil && r.Token != *w.token || r.Path != "/locks/billing/job" {
			t.Fatalf("node %d record %d: got %q, want %+v\n%s", node, i, lines[i], w, strings.Join(lines, "\n"))
		}
		if r.Time.IsZero() || i > 0 && r.Time.Before(got[i-1].Time) {
			t.Fatalf("node %d record %d: bad time %v", node, i, r.Time)
		}
	}
}

func firstRev(t *testing.T, n *node.Node, p string) uint64 {
	recs, err := n.Audit.Find(audit.Query{Prefix: p})
	if err != nil || len(recs) == 0 {
		t.Fatal(err)
	}
	return recs[0].Rev
}

type collectSub struct{ events []wire.Event }

func (s *collectSub) Send(evs []wire.Event) bool {
	s.events = append(s.events, evs...)
	return true
}

func mustLocate(t *testing.T, c *nodetest.Cluster, p string) uint64 {
	t.Helper()
	r, err := c.Nodes[0].Host.Table().Locate(p)
	if err != nil {
		t.Fatal(err)
	}
	return r.Shard
}

// waitFor polls cond until it holds (the test's own deadline bounds it).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
