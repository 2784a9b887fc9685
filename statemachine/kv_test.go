package statemachine

import (
	"testing"

	"github.com/wardenlock/warden/wire"
)

func put(path, value string, lease uint64) *wire.Request {
	return &wire.Request{Op: wire.OpKVPut, Path: path, Value: []byte(value), Lease: lease, TTL: 5000}
}

func cas(r *wire.Request, version uint64) *wire.Request {
	r.Flags |= wire.FlagHasExpect
	r.Version = version
	return r
}

func TestKV(t *testing.T) {
	h := newHarness(t)
	steps := []struct {
		name    string
		req     *wire.Request
		want    wire.Code
		version uint64
	}{
		{"create must-not-exist", cas(put("/svc/a", "1", 0), 0), wire.OK, 1},
		{"create again fails", cas(put("/svc/a", "x", 0), 0), wire.VersionMismatch, 0},
		{"plain put bumps", put("/svc/a", "2", 0), wire.OK, 2},
		{"cas right version", cas(put("/svc/a", "3", 0), 2), wire.OK, 3},
		{"cas wrong version", cas(put("/svc/a", "4", 0), 2), wire.VersionMismatch, 0},
		{"delete wrong version", cas(&wire.Request{Op: wire.OpKVDelete, Path: "/svc/a"}, 1), wire.VersionMismatch, 0},
		{"delete", &wire.Request{Op: wire.OpKVDelete, Path: "/svc/a"}, wire.OK, 3},
		{"delete missing", &wire.Request{Op: wire.OpKVDelete, Path: "/svc/a"}, wire.NotFound, 0},
		{"recreate starts at 1", put("/svc/a", "5", 0), wire.OK, 1},
	}
	for _, st := range steps {
		r := h.expect(st.req, st.want)
		if r.Version != st.version {
			t.Fatalf("%s: version %d, want %d", st.name, r.Version, st.version)
		}
	}
	get := h.read(&wire.Request{Op: wire.OpKVGet, Path: "/svc/a"})
	if string(get.Value) != "5" || get.KVs[0].CreateRev == 0 || get.KVs[0].ModRev < get.KVs[0].CreateRev {
		t.Fatalf("get %+v", get)
	}
}

func TestKVListAndEphemeral(t *testing.T) {
	h := newHarness(t)
	h.mustOK(put("/svc/b", "b", 0))
	h.mustOK(put("/svc/a", "a", 4))
	h.mustOK(put("/svc/a/x", "ax", 4))
	h.mustOK(put("/other/z", "z", 0))
	list := h.read(&wire.Request{Op: wire.OpKVList, Path: "/svc"})
	if len(list.KVs) != 3 || list.KVs[0].Key != "/svc/a" || list.KVs[1].Key != "/svc/a/x" || list.KVs[2].Key != "/svc/b" {
		t.Fatalf("list %+v", list.KVs)
	}
	if l := h.read(&wire.Request{Op: wire.OpKVList, Path: "/svc", Limit: 1}); len(l.KVs) != 1 {
		t.Fatalf("limit ignored: %d", len(l.KVs))
	}
	h.mustOK(revoke(4))
	list = h.read(&wire.Request{Op: wire.OpKVList, Path: "/svc"})
	if len(list.KVs) != 1 || list.KVs[0].Key != "/svc/b" {
		t.Fatalf("ephemeral keys survived their lease: %+v", list.KVs)
	}
	// Rebinding a key to no lease makes it persistent.
	h.mustOK(put("/svc/c", "c", 5))
	h.mustOK(put("/svc/c", "c2", 0))
	h.mustOK(revoke(5))
	if g := h.read(&wire.Request{Op: wire.OpKVGet, Path: "/svc/c"}); g.Code != wire.OK {
		t.Fatal("a key rebound to no lease was deleted with the old lease")
	}
}
