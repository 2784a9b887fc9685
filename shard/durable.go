package shard

import (
	"fmt"
	"io"
	"log/slog"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/wardenlock/warden/statemachine"
)

// Durabler is a Recorder that can make what it was given durable
// (audit.Store, which keeps recent records only in memory).
type Durabler interface {
	Durable() error
}

// durableSM makes the recorder's records durable before a snapshot is
// saved or installed. A restarting replica applies again, and so records
// again, only the entries after its latest snapshot: the records of the
// entries a snapshot covers must be on disk before it exists. A follower
// installing a leader's snapshot skips entries (its history has that gap,
// as before); what it recorded until then is made durable first too.
type durableSM struct {
	*statemachine.StateMachine
	rec Durabler
	log *slog.Logger
}

func (m durableSM) SaveSnapshot(w io.Writer, fc sm.ISnapshotFileCollection, stop <-chan struct{}) error {
	if err := m.rec.Durable(); err != nil {
		// Aborted, not failed: dragonboat tries again at the next one.
		return fmt.Errorf("%w: %v", sm.ErrSnapshotAborted, err)
	}
	return m.StateMachine.SaveSnapshot(w, fc, stop)
}

func (m durableSM) RecoverFromSnapshot(r io.Reader, files []sm.SnapshotFile, stop <-chan struct{}) error {
	if err := m.rec.Durable(); err != nil {
		// The replica must still come up: the records at risk are lost
		// only if the process also dies before the store's next flush.
		m.log.Error("audit records not made durable before installing a snapshot", "err", err)
	}
	return m.StateMachine.RecoverFromSnapshot(r, files, stop)
}
