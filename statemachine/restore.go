package statemachine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/wardenlock/warden/wire"
)

// Backup and restore work on the state machine's own snapshot encoding:
//
//   - a backup is DumpQuery, a linearizable read (SyncRead) that returns the
//     shard's whole state as SaveSnapshot writes it, at one applied index;
//   - a restore is one Raft entry of kind kindRestore carrying that dump:
//     every replica of the new cluster applies it, so the restored state is
//     part of the log (a replica added later replays it like any other
//     entry) and snapshots, hashes and recovery need nothing new.
//
// A restore only goes into a shard that has never held state; every token
// issued afterwards is above Floor, which the restorer sets above every token
// issued before the backup.

// kindRestore is the command kind of a restore entry. Its value is the ops
// allocation's first internal op number, so no other branch's kinds collide.
const kindRestore = 130

// restoreHeader: version, kind, stamped time (8 bytes), floor (8 bytes).
const restoreHeader = 2 + 8 + 8

// MaxDump bounds one shard's dump, so a restore entry stays well inside
// dragonboat's 64 MiB message batches.
const MaxDump = 48 << 20

// DumpQuery (Lookup) returns Dump: the shard's full state.
type DumpQuery struct{}

// Dump is one shard's state as SaveSnapshot writes it, with its summary.
type Dump struct {
	State []byte
	Stats Stats
}

// EncodeRestore makes the entry that installs a dump into a new shard and
// raises its fence floor to at least floor.
func EncodeRestore(now int64, floor uint64, dump []byte) []byte {
	b := make([]byte, restoreHeader, restoreHeader+len(dump))
	b[0], b[1] = commandVersion, kindRestore
	binary.BigEndian.PutUint64(b[2:], uint64(now))
	binary.BigEndian.PutUint64(b[10:], floor)
	return append(b, dump...)
}

// RestoreObserver is told, on every replica, that a restore entry replaced
// the shard's state (the leader's lessor must learn the restored leases).
// The shard layer's Observer may implement it.
type RestoreObserver interface {
	Restored(index uint64)
}

func (s *StateMachine) dump() (Dump, error) {
	var buf bytes.Buffer
	if err := s.SaveSnapshot(&buf, nil, nil); err != nil {
		return Dump{}, err
	}
	return Dump{State: buf.Bytes(), Stats: s.stats()}, nil
}

// pristine: the shard has never issued a token, made an event or a lease.
// (Range assignments and client dedup records may exist: they come from the
// new cluster's own start-up and are replaced by the dump's.)
func (s *StateMachine) pristine() bool {
	return s.rev == 0 && s.fence == 0 && s.floor == 0 && len(s.leases) == 0 && s.singles.n == 0 && s.nKVs == 0
}

// applyRestore applies a restore entry. Applying it again (a retry by the
// restorer) is a no-op answered OK once the floor is in place.
func (s *StateMachine) applyRestore(e sm.Entry) sm.Result {
	cmd := e.Cmd
	if len(cmd) < restoreHeader {
		return sm.Result{Data: s.encodeResults([]wire.Response{{Code: wire.Malformed, Msg: "restore entry too short"}})}
	}
	now := int64(binary.BigEndian.Uint64(cmd[2:]))
	floor := binary.BigEndian.Uint64(cmd[10:])
	s.events = s.events[:0]
	resp := s.restore(e.Index, now, floor, cmd[restoreHeader:])
	if s.observer != nil && len(s.events) > 0 {
		s.observer.Applied(e.Index, s.events)
	}
	if resp.Code == wire.OK {
		if o, ok := s.observer.(RestoreObserver); ok {
			o.Restored(e.Index)
		}
	}
	return sm.Result{Value: 1, Data: s.encodeResults([]wire.Response{resp})}
}

func (s *StateMachine) restore(index uint64, now int64, floor uint64, dump []byte) wire.Response {
	if !s.pristine() {
		if s.floor >= floor && floor > 0 {
			return wire.Response{Code: wire.OK, Token: s.floor, Rev: s.rev, Msg: "already restored"}
		}
		return wire.Response{Code: wire.RestoreRefused,
			Msg: fmt.Sprintf("shard %d already holds state (revision %d, fence %d): a backup is restored only into a new cluster", s.cfg.ShardID, s.rev, max(s.fence, s.floor))}
	}
	prevNow := s.now
	if err := s.RecoverFromSnapshot(bytes.NewReader(dump), nil, nil); err != nil {
		var msg string
		if errors.Is(err, errBadMode) {
			msg = "corrupt dump: " + err.Error()
		} else {
			msg = "cannot read dump: " + err.Error()
		}
		return wire.Response{Code: wire.InvalidArgument, Msg: msg}
	}
	// The dump's log position and terms belong to the old cluster: this
	// cluster's log goes on from here, and its leaders count terms anew.
	s.applied, s.maxTerm = index, 0
	s.lastIndex.Store(index)
	s.advance(max(prevNow, now))
	s.floor = max(s.floor, s.fence, floor)
	s.emit(wire.Event{Kind: wire.EvFence, Token: s.floor})
	return wire.Response{Code: wire.OK, Token: s.floor, Rev: s.rev}
}
