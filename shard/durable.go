package shard

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/wardenlock/warden/statemachine"
)

// Durabler is a Recorder that can make what it was given durable
// (audit.Store, which keeps recent records only in memory).
type Durabler interface {
	Durable() error
}

// concurrentSM runs a data shard's state machine under dragonboat's
// concurrent-snapshot interface. With the regular interface a replica
// applies nothing while it saves a snapshot, and every replica saves at
// the same entry, so the whole shard would stop for the save: the audit
// store's flush (up to a 32 MiB memtable) and the snapshot file's syncs,
// 130-180 ms at a time on the benchmark machine. Here PrepareSnapshot encodes the state into memory while updates are
// held (the encoding alone), and SaveSnapshot makes the audit records
// durable and writes the image while later entries apply.
//
// The audit records of the entries a snapshot covers must be on disk
// before the snapshot exists: a restarting replica applies (and records)
// again only the entries after its latest snapshot. Those entries were
// applied, so their records queued, before PrepareSnapshot; Durable in
// SaveSnapshot makes every record queued before it durable, so it covers
// them (and some later ones). A follower installing a leader's snapshot
// skips entries (its history has that gap, as before); what it recorded
// until then is made durable first too.
//
// dragonboat runs Lookup beside Update for a concurrent state machine, so
// mu orders them here as dragonboat's own lock did for the regular one:
// Update, PrepareSnapshot and RecoverFromSnapshot exclusive, lookups
// shared.
type concurrentSM struct {
	mu  sync.RWMutex
	sm  *statemachine.StateMachine
	rec Durabler // nil without a durable recorder
	log *slog.Logger
	// bound asks for a snapshot when the log grows past its bytes (nil:
	// entries only; logbound.go).
	bound *logBound
	// saved and recovered count snapshots written and installed.
	saved, recovered atomic.Uint64
	// onRecover hears the revision a recovery left the state at (nil:
	// no one): the watch feed skips to it (Shard.recoveredTo).
	onRecover func(rev uint64)
}

var (
	_ sm.IConcurrentStateMachine = (*concurrentSM)(nil)
	_ sm.IHash                   = (*concurrentSM)(nil)
)

func (c *concurrentSM) Update(entries []sm.Entry) ([]sm.Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range entries {
		r, err := c.sm.Update(entries[i])
		if err != nil {
			return nil, err
		}
		entries[i].Result = r
	}
	c.bound.applied(entries)
	return entries, nil
}

func (c *concurrentSM) Lookup(q any) (any, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.sm.Lookup(q)
}

func (c *concurrentSM) PrepareSnapshot() (any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bound.prepared()
	return c.sm.Image()
}

func (c *concurrentSM) SaveSnapshot(ctx any, w io.Writer, _ sm.ISnapshotFileCollection, stop <-chan struct{}) error {
	im, ok := ctx.(*statemachine.Image)
	if !ok {
		return fmt.Errorf("shard: snapshot context is a %T, want *statemachine.Image", ctx)
	}
	if c.rec != nil {
		if err := c.rec.Durable(); err != nil {
			// Aborted, not failed: dragonboat tries again at the next one.
			return fmt.Errorf("%w: %v", sm.ErrSnapshotAborted, err)
		}
	}
	_, err := im.CopyTo(w, stop)
	if err == nil {
		c.saved.Add(1)
	}
	return err
}

func (c *concurrentSM) RecoverFromSnapshot(r io.Reader, files []sm.SnapshotFile, stop <-chan struct{}) error {
	if c.rec != nil {
		if err := c.rec.Durable(); err != nil {
			// The replica must still come up: the records at risk are lost
			// only if the process also dies before the store's next flush.
			c.log.Error("audit records not made durable before installing a snapshot", "err", err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.sm.RecoverFromSnapshot(r, files, stop); err != nil {
		return err
	}
	c.recovered.Add(1)
	c.bound.prepared() // the log before the snapshot is not this replica's to replay
	if c.onRecover != nil {
		c.onRecover(c.sm.Rev())
	}
	return nil
}

func (c *concurrentSM) GetHash() (uint64, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.sm.GetHash()
}

func (c *concurrentSM) Close() error { return c.sm.Close() }
