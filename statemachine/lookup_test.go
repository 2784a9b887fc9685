package statemachine

import (
	"errors"
	"testing"

	"github.com/wardenlock/warden/wire"
)

func TestLockInfoAndList(t *testing.T) {
	h := newHarness(t)
	h.mustOK(acq("/l/b", sh, 1, "o"))
	h.mustOK(acq("/l/b", sh, 2, "p"))
	h.mustOK(acq("/l/a/x", ex, 3, "q"))
	h.expect(wait(with(acq("/l/b", ex, 4, "r"), 9, 1)), wire.Queued)
	h.expect(wait(with(acq("/l/b", sh, 5, "s"), 9, 2)), wire.Queued)
	info := h.read(&wire.Request{Op: wire.OpLockInfo, Path: "/l/b"})
	if info.Code != wire.OK || len(info.Holders) != 2 || info.Mode != sh || len(info.Waiters) != 2 ||
		info.Waiters[0].Seq != 1 || info.Waiters[1].Seq != 2 {
		t.Fatalf("lock info %+v", info)
	}
	if r := h.read(&wire.Request{Op: wire.OpLockInfo, Path: "/l/zz"}); r.Code != wire.NotFound {
		t.Fatalf("unknown lock: %v", r.Code)
	}
	list := h.read(&wire.Request{Op: wire.OpListLocks, Path: "/l"})
	if len(list.Holders) != 3 || list.Holders[0].Path != "/l/a/x" || list.Holders[1].Path != "/l/b" {
		t.Fatalf("list %+v", list.Holders)
	}
	if l := h.read(&wire.Request{Op: wire.OpListLocks, Path: "/l", Limit: 2}); len(l.Holders) != 2 {
		t.Fatalf("limit: %d holders", len(l.Holders))
	}
	st, _ := h.sm.Lookup(StatsQuery{})
	if s := st.(Stats); s.Locks != 3 || s.Waiters != 2 || s.Leases != 5 || s.Rev == 0 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := h.sm.Lookup(42); !errors.Is(err, wire.ErrUnknownOp) {
		t.Fatalf("unknown query: %v", err)
	}
	if r := h.read(&wire.Request{Op: wire.OpAcquire, Path: "/l/a"}); r.Code != wire.UnknownOp {
		t.Fatalf("a write as a read: %v", r.Code)
	}
}
