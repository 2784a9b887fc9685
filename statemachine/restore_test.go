package statemachine

import (
	"testing"

	"github.com/wardenlock/warden/wire"
)

func dumpOf(t *testing.T, h *harness) Dump {
	t.Helper()
	v, err := h.sm.Lookup(DumpQuery{})
	if err != nil {
		t.Fatal(err)
	}
	return v.(Dump)
}

func TestRestoreInstallsDumpAndRaisesFloor(t *testing.T) {
	src := newHarness(t)
	g := src.mustOK(acq("/a/b", wire.Exclusive, 0, "alice"))
	src.mustOK(&wire.Request{Op: wire.OpSession, Lease: 42, TTL: 5000})
	src.mustOK(acq("/a/c", wire.Exclusive, 42, "bob"))
	src.expect(wait(with(acq("/a/c", wire.Exclusive, 0, "carol"), 9, 1)), wire.Queued)
	src.mustOK(&wire.Request{Op: wire.OpKVPut, Path: "/cfg/x", Value: []byte("v1")})
	d := dumpOf(t, src)
	if d.Stats.Locks != 2 || d.Stats.Waiters != 1 || d.Stats.KVs != 1 || d.Stats.Fence < g.Token {
		t.Fatalf("dump stats %+v", d.Stats)
	}

	dst := newHarness(t) // a new cluster's shard: ranges set, nothing else
	dst.index = 500
	const margin = 1 << 20
	floor := d.Stats.Fence + margin
	resp := dst.raw(EncodeRestore(dst.now, floor, d.State))[0]
	if resp.Code != wire.OK || resp.Token != floor {
		t.Fatalf("restore: %v %s token %d", resp.Code, resp.Msg, resp.Token)
	}
	info := dst.read(&wire.Request{Op: wire.OpLockInfo, Path: "/a/b"})
	if info.Code != wire.OK || len(info.Holders) != 1 || info.Holders[0].Token != g.Token || info.Holders[0].Owner != "alice" {
		t.Fatalf("restored lock /a/b: %+v", info)
	}
	kv := dst.read(&wire.Request{Op: wire.OpKVGet, Path: "/cfg/x"})
	if kv.Code != wire.OK || string(kv.Value) != "v1" {
		t.Fatalf("restored kv: %+v", kv)
	}
	if st := dst.sm.stats(); st.Applied != 501 || st.Waiters != 1 {
		t.Fatalf("after restore: %+v", st)
	}
	// Every token issued after the restore is above the floor.
	n := dst.mustOK(acq("/b/new", wire.Exclusive, 0, "dave"))
	if n.Token <= floor {
		t.Fatalf("new token %d not above floor %d", n.Token, floor)
	}
	// The restored waiter is handed the lock when bob's session is revoked.
	dst.mustOK(revoke(42))
	info = dst.read(&wire.Request{Op: wire.OpLockInfo, Path: "/a/c"})
	if len(info.Holders) != 1 || info.Holders[0].Owner != "carol" || info.Holders[0].Token <= floor {
		t.Fatalf("hand-off after restore: %+v", info.Holders)
	}
	// A retry of the same restore is a no-op; a different one is refused.
	if r := dst.raw(EncodeRestore(dst.now, floor, d.State))[0]; r.Code != wire.OK {
		t.Fatalf("repeated restore: %v %s", r.Code, r.Msg)
	}
	if r := dst.raw(EncodeRestore(dst.now, floor+margin, d.State))[0]; r.Code != wire.RestoreRefused {
		t.Fatalf("restore over live state: %v %s", r.Code, r.Msg)
	}
}

func TestRestoreRefusesBadDumps(t *testing.T) {
	src := newHarness(t)
	src.mustOK(acq("/a/b", wire.Exclusive, 0, "alice"))
	d := dumpOf(t, src)
	dst := newHarness(t)
	bad := append([]byte(nil), d.State...)
	bad = bad[:len(bad)-3]
	if r := dst.raw(EncodeRestore(dst.now, 10, bad))[0]; r.Code != wire.InvalidArgument {
		t.Fatalf("truncated dump: %v %s", r.Code, r.Msg)
	}
	other := newHarnessWith(t, func() Config { c := testConfig(); c.ShardID = 8; return c }())
	if r := other.raw(EncodeRestore(other.now, 10, d.State))[0]; r.Code != wire.InvalidArgument {
		t.Fatalf("dump of another shard: %v %s", r.Code, r.Msg)
	}
	if r := dst.raw([]byte{commandVersion, kindRestore, 1})[0]; r.Code != wire.Malformed {
		t.Fatalf("short entry: %v", r.Code)
	}
	// Nothing was installed by the failures.
	if !dst.sm.pristine() {
		t.Fatal("a failed restore changed the shard")
	}
}

func TestRestoredReplicasHashEqual(t *testing.T) {
	src := newHarness(t)
	src.mustOK(acq("/a/b", wire.Exclusive, 0, "alice"))
	d := dumpOf(t, src)
	a, b := newHarness(t), newHarness(t)
	a.raw(EncodeRestore(a.now, 99, d.State))
	b.raw(EncodeRestore(b.now, 99, d.State))
	ha, _ := a.sm.GetHash()
	hb, _ := b.sm.GetHash()
	if ha != hb {
		t.Fatal("replicas applying the same restore entry differ")
	}
}
