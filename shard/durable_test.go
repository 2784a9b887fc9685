package shard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// steps records the order of a recorder's Durable calls and a writer's
// writes.
type steps struct {
	mu  sync.Mutex
	log []string
	err error // Durable's answer
}

func (s *steps) add(x string) { s.mu.Lock(); s.log = append(s.log, x); s.mu.Unlock() }

func (s *steps) Durable() error { s.add("durable"); return s.err }

func (s *steps) String() string { s.mu.Lock(); defer s.mu.Unlock(); return fmt.Sprint(s.log) }

// gateWriter blocks its first write until open is closed.
type gateWriter struct {
	buf     bytes.Buffer
	st      *steps
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

func (w *gateWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { w.st.add("write"); close(w.entered); <-w.open })
	return w.buf.Write(p)
}

type smFeed struct{ index uint64 }

func (f *smFeed) entry(t *testing.T, ops ...*wire.Request) sm.Entry {
	t.Helper()
	cmd, err := statemachine.EncodeCommand(nil, 1_000_000+int64(f.index), ops)
	if err != nil {
		t.Fatal(err)
	}
	f.index++
	return sm.Entry{Index: f.index, Cmd: cmd}
}

func saved(t *testing.T, m *statemachine.StateMachine) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := m.SaveSnapshot(&b, nil, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestConcurrentSnapshotIsThePreparedState: a shard's snapshot holds the
// state at PrepareSnapshot, and entries apply while it is being written
// (the writer blocks until they have); the audit records are made durable
// before any of it is written.
func TestConcurrentSnapshotIsThePreparedState(t *testing.T) {
	cfg := statemachine.DefaultConfig()
	cfg.ShardID = 7
	m := statemachine.New(cfg)
	st := &steps{}
	c := &concurrentSM{sm: m, rec: st, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var f smFeed
	acquire := func(i int) *wire.Request {
		return &wire.Request{Op: wire.OpAcquire, Path: fmt.Sprintf("/snap/ns%d/job", i), Mode: wire.Exclusive, TTL: 60000, Owner: "o"}
	}
	first := []sm.Entry{f.entry(t, &wire.Request{Op: wire.OpSetRanges, Gen: 1, Ranges: []wire.Range{{Shard: 7}}})}
	for i := 0; i < 50; i++ {
		first = append(first, f.entry(t, acquire(i)))
	}
	out, err := c.Update(first)
	if err != nil {
		t.Fatal(err)
	}
	if out[len(out)-1].Result.Value != 1 {
		t.Fatalf("the last entry's result counts %d ops, want 1", out[len(out)-1].Result.Value)
	}
	want := saved(t, m)

	ctx, err := c.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	w := &gateWriter{st: st, entered: make(chan struct{}), open: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- c.SaveSnapshot(ctx, w, nil, nil) }()
	<-w.entered // the save holds the writer

	applied := make(chan error, 1)
	go func() {
		var later []sm.Entry
		for i := 50; i < 60; i++ {
			later = append(later, f.entry(t, acquire(i)))
		}
		_, err := c.Update(later)
		applied <- err
	}()
	select {
	case err := <-applied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("entries did not apply while a snapshot was being written")
	}
	close(w.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := st.String(); got != "[durable write]" {
		t.Fatalf("steps %s, want the records made durable before the snapshot is written", got)
	}
	if !bytes.Equal(w.buf.Bytes(), want) {
		t.Fatalf("the snapshot (%d bytes) is not the state at PrepareSnapshot (%d bytes)", w.buf.Len(), len(want))
	}
	if bytes.Equal(saved(t, m), want) {
		t.Fatal("the later entries did not change the state: the test shows nothing")
	}

	// The snapshot installs: a new replica from it saves the same bytes.
	r := &concurrentSM{sm: statemachine.New(cfg), rec: &steps{}, log: c.log}
	if err := r.RecoverFromSnapshot(bytes.NewReader(w.buf.Bytes()), nil, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(saved(t, r.sm), want) {
		t.Fatal("a replica recovered from the snapshot saves different bytes")
	}
}

// TestConcurrentSnapshotAbortsWithoutDurableRecords: when the audit records
// cannot be made durable the save is aborted (dragonboat tries again at
// the next one) and nothing is written.
func TestConcurrentSnapshotAbortsWithoutDurableRecords(t *testing.T) {
	cfg := statemachine.DefaultConfig()
	cfg.ShardID = 7
	st := &steps{err: errors.New("disk full")}
	c := &concurrentSM{sm: statemachine.New(cfg), rec: st, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, err := c.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := c.SaveSnapshot(ctx, &b, nil, nil); !errors.Is(err, sm.ErrSnapshotAborted) {
		t.Fatalf("SaveSnapshot: %v, want ErrSnapshotAborted", err)
	}
	if b.Len() != 0 {
		t.Fatalf("%d bytes written by an aborted save", b.Len())
	}
}

// TestSnapshotCounts: a replica counts the snapshots it wrote and those it
// recovered from, not an aborted save; a recovery starts the log-size
// count over.
func TestSnapshotCounts(t *testing.T) {
	cfg := statemachine.DefaultConfig()
	cfg.ShardID = 7
	st := &steps{}
	bound := &logBound{limit: 1 << 20, request: func(uint64) {}}
	c := &concurrentSM{sm: statemachine.New(cfg), rec: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)), bound: bound}
	var f smFeed
	if _, err := c.Update([]sm.Entry{f.entry(t, &wire.Request{Op: wire.OpSetRanges, Gen: 1, Ranges: []wire.Range{{Shard: 7}}})}); err != nil {
		t.Fatal(err)
	}
	if bound.bytes.Load() == 0 || bound.entries.Load() != 1 {
		t.Fatalf("log-size count %d bytes, %d entries after one entry", bound.bytes.Load(), bound.entries.Load())
	}
	ctx, err := c.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := c.SaveSnapshot(ctx, &b, nil, nil); err != nil {
		t.Fatal(err)
	}
	st.err = errors.New("disk full")
	ctx2, _ := c.PrepareSnapshot()
	if err := c.SaveSnapshot(ctx2, io.Discard, nil, nil); err == nil {
		t.Fatal("a save without durable records succeeded")
	}
	if c.saved.Load() != 1 {
		t.Fatalf("saved %d, want 1 (the aborted save does not count)", c.saved.Load())
	}
	bound.bytes.Store(999)
	st.err = nil
	if err := c.RecoverFromSnapshot(bytes.NewReader(b.Bytes()), nil, nil); err != nil {
		t.Fatal(err)
	}
	if c.recovered.Load() != 1 || bound.bytes.Load() != 0 {
		t.Fatalf("recovered %d (want 1), log-size count %d after recovery (want 0)", c.recovered.Load(), bound.bytes.Load())
	}
}
