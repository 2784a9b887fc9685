package control

import (
	"io"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/wardenlock/warden/placement"
)

// metaSM runs the placement table's state machine (placement.Meta) as the
// meta group's dragonboat replica. It is small and changes rarely, so the
// simple IStateMachine fits.
type metaSM struct{ m *placement.Meta }

var (
	_ sm.IStateMachine = metaSM{}
	_ sm.IHash         = metaSM{}
)

func newMetaSM(shardID, replicaID uint64) sm.IStateMachine { return metaSM{placement.NewMeta()} }

func (s metaSM) Update(e sm.Entry) (sm.Result, error) {
	r := s.m.Apply(e.Cmd)
	return sm.Result{Value: r.Value, Data: r.Data}, nil
}

func (s metaSM) Lookup(q any) (any, error) { return s.m.Lookup(q) }

func (s metaSM) SaveSnapshot(w io.Writer, _ sm.ISnapshotFileCollection, _ <-chan struct{}) error {
	return s.m.SaveSnapshot(w)
}

func (s metaSM) RecoverFromSnapshot(r io.Reader, _ []sm.SnapshotFile, _ <-chan struct{}) error {
	return s.m.RecoverFromSnapshot(r)
}

func (s metaSM) GetHash() (uint64, error) { return s.m.GetHash() }

func (s metaSM) Close() error { return nil }
