package shard

import (
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

func slotProposer(slots int, linger time.Duration) *proposer {
	return &proposer{
		s:        &Shard{cfg: Config{EntryLinger: linger}},
		in:       make(chan proposal, 16),
		stop:     make(chan struct{}),
		maxOps:   8,
		maxBytes: 1 << 20,
		slots:    make(chan struct{}, slots),
	}
}

func op(id uint64) proposal {
	return proposal{req: &wire.Request{ID: id, Op: wire.OpNoop}, to: AnswerFunc(func(*wire.Response) {})}
}

// A free slot is taken at once and the batch goes as it is: an idle node
// adds no delay.
func TestTakeSlotFreeGoesAtOnce(t *testing.T) {
	p := slotProposer(1, time.Hour)
	p.in <- op(2)
	size := 0
	batch, slot := p.takeSlot([]proposal{op(1)}, &size)
	if slot == nil || len(batch) != 1 || len(p.slots) != 1 {
		t.Fatalf("slot %v, batch %d, slots taken %d; want a slot and the batch unchanged", slot != nil, len(batch), len(p.slots))
	}
	f := newInflight(batch)
	f.slot = slot
	f.free()
	if len(p.slots) != 0 {
		t.Fatal("freeing the entry did not give its slot back")
	}
}

// With every slot taken the entry waits for one, and what arrives
// meanwhile joins it, up to the batch bound.
func TestTakeSlotBusyGathers(t *testing.T) {
	p := slotProposer(1, 2*time.Second)
	p.slots <- struct{}{} // another shard's entry is in flight
	for i := uint64(2); i <= 12; i++ {
		p.in <- op(i)
	}
	go func() {
		for len(p.in) > 16-1-7 { // wait until the batch is full (8 ops)
			time.Sleep(time.Millisecond)
		}
		<-p.slots // that entry completes
	}()
	size := 0
	batch, slot := p.takeSlot([]proposal{op(1)}, &size)
	if slot == nil {
		t.Fatal("no slot after one was freed")
	}
	if len(batch) != p.maxOps {
		t.Fatalf("batch of %d, want the %d-op bound", len(batch), p.maxOps)
	}
	if len(p.in) != 4 {
		t.Fatalf("%d operations left queued, want 4", len(p.in))
	}
}

// With every slot held (a stuck shard) the entry goes after EntryLinger
// without one.
func TestTakeSlotLingerBound(t *testing.T) {
	p := slotProposer(1, 5*time.Millisecond)
	p.slots <- struct{}{}
	size := 0
	batch, slot := p.takeSlot([]proposal{op(1)}, &size)
	if slot != nil || len(batch) != 1 {
		t.Fatalf("slot %v, batch %d; want no slot and the batch as it was", slot != nil, len(batch))
	}
	// The timer is reused for the next entry.
	if _, slot = p.takeSlot(batch, &size); slot != nil {
		t.Fatal("got a slot that is still held")
	}
}
