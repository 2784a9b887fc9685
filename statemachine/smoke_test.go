package statemachine

import (
	"testing"

	"github.com/wardenlock/warden/wire"
)

func TestSmoke(t *testing.T) {
	h := newHarness(t)
	a := h.mustOK(acq("/locks/a", wire.Exclusive, 1, "o"))
	h.expect(wait(with(acq("/locks/a", wire.Exclusive, 2, "p"), 9, 1)), wire.Queued)
	r := h.mustOK(rel("/locks/a", a.Token))
	if len(r.Grants) != 1 || r.Grants[0].Seq != 1 {
		t.Fatalf("grants %+v", r.Grants)
	}
}
