package shard

import (
	"testing"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/wardenlock/warden/lease"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// Stamps follow the replica's applied time plus real elapsed time, never a
// node's wall clock: a proposer whose clock is hours ahead stamps within
// milliseconds of the cluster's time.
func TestStampIgnoresWallClockSkew(t *testing.T) {
	ahead := lease.NewManualClock(time.Unix(1_000_000, 0).Add(2 * time.Hour))
	s := &Shard{clock: ahead}
	m := statemachine.New(statemachine.DefaultConfig())
	s.sm.Store(m)
	p := &proposer{s: s}
	if got := p.stamp(); got != ahead.Now().UnixMilli() {
		t.Fatalf("a fresh shard stamps the wall clock: got %d", got)
	}
	// Apply an entry stamped at the cluster's time (an hour behind this
	// node's skewed clock).
	cluster := time.Unix(1_000_000, 0).UnixMilli()
	cmd, _ := statemachine.EncodeCommand(nil, cluster, []*wire.Request{{Op: wire.OpNoop}})
	if _, err := m.Update(smEntry(1, cmd)); err != nil {
		t.Fatal(err)
	}
	got := p.stamp()
	if got < cluster || got > cluster+1000 {
		t.Fatalf("stamp %d is not anchored on the applied time %d (skewed clock says %d)", got, cluster, ahead.Now().UnixMilli())
	}
}

func smEntry(index uint64, cmd []byte) sm.Entry { return sm.Entry{Index: index, Cmd: cmd} }
