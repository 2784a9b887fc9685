package raftwal

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/wardenlock/warden/internal/diskfs"
	"github.com/wardenlock/warden/internal/diskfs/crashfs"
)

// Power loss. A workload runs on crashfs; after an operation that changes
// the file system, the state as of then is captured, and the image a power
// loss would leave (crashfs.Mode: only what was synced, everything, torn
// sectors of unsynced writes, a write cut short) is opened as a store and
// checked against a model of what was written: the store opens, and holds
// exactly the state after some prefix of the records written, at least as
// long as every record of every call acknowledged before the operation.
// So nothing acknowledged is lost, nothing is invented, a torn tail is cut
// at a record boundary, and a record no sync covered may or may not be
// there, but only with every record before it.

const powerDir = "node/raft/wardenwal"

// powerOpts are the store options of the power-loss workloads: small
// segments (rotations, checkpoints, recycling every few dozen calls),
// spares made inline (the operations are the same on every run of a seed).
func powerOpts(fs diskfs.FS) Options {
	return Options{SegmentSize: 16 << 10, fillInline: true, FS: fs}
}

// flakySpares refuses to create a zero-filled spare now and then, so that
// the store also starts growing segments (as when its filler fails).
type flakySpares struct {
	diskfs.FS
	rng *rand.Rand
}

func (f flakySpares) Create(name string, perm os.FileMode) (diskfs.File, error) {
	if filepath.Base(name) == spareName && f.rng.Intn(4) == 0 {
		return nil, errors.New("no spare this time")
	}
	return f.FS.Create(name, perm)
}

// replicaModel is what the store must hold for one replica.
type replicaModel struct {
	bootstrap *pb.Bootstrap
	hasState  bool
	state     pb.State
	snap      pb.Snapshot
	compact   uint64
	log       []pb.Entry // consecutive, the live entries
}

func (r *replicaModel) last() uint64 {
	if len(r.log) == 0 {
		return 0
	}
	return r.log[len(r.log)-1].Index
}

// walRec is one record a call writes: one replica's part of it.
type walRec struct {
	key       nodeKey
	remove    bool // forget the replica first (RemoveNodeData, ImportSnapshot)
	bootstrap *pb.Bootstrap
	state     *pb.State
	snap      *pb.Snapshot
	reset     bool // the snapshot came from the leader: the log restarts after it
	compact   uint64
	ents      []pb.Entry
}

type walModel map[nodeKey]*replicaModel

func (m walModel) clone() walModel {
	c := make(walModel, len(m))
	for k, r := range m {
		cr := *r
		cr.log = append([]pb.Entry(nil), r.log...)
		c[k] = &cr
	}
	return c
}

// apply is what a record means (the API's contract, not the store's code).
func (m walModel) apply(rec walRec) {
	if rec.remove {
		delete(m, rec.key)
		if rec.bootstrap == nil && rec.state == nil && rec.snap == nil {
			return
		}
	}
	r := m[rec.key]
	if r == nil {
		r = &replicaModel{}
		m[rec.key] = r
	}
	if rec.bootstrap != nil {
		r.bootstrap = rec.bootstrap
	}
	if rec.snap != nil && rec.snap.Index > r.snap.Index {
		r.snap = *rec.snap
		if rec.reset {
			r.log = nil
		}
	}
	if rec.state != nil {
		r.hasState, r.state = true, *rec.state
	}
	if rec.compact > r.compact {
		r.compact = rec.compact
		i := sort.Search(len(r.log), func(i int) bool { return r.log[i].Index > rec.compact })
		r.log = r.log[i:]
	}
	if len(rec.ents) > 0 {
		first := rec.ents[0].Index
		i := sort.Search(len(r.log), func(i int) bool { return r.log[i].Index >= first })
		r.log = r.log[:i]
		if len(r.log) > 0 && r.last()+1 != first {
			r.log = nil
		}
		r.log = append(r.log, rec.ents...)
	}
}

// matches says how the store differs from the model (nil: it does not).
func (m walModel) matches(w *WAL, keys []nodeKey) error {
	infos, err := w.ListNodeInfo()
	if err != nil {
		return err
	}
	boot := 0
	for _, r := range m {
		if r.bootstrap != nil {
			boot++
		}
	}
	if len(infos) != boot {
		return fmt.Errorf("%d replicas with bootstrap info, want %d", len(infos), boot)
	}
	for _, k := range keys {
		r := m[k]
		if r == nil {
			r = &replicaModel{}
		}
		bs, err := w.GetBootstrapInfo(k.shard, k.replica)
		switch {
		case r.bootstrap == nil && !errors.Is(err, raftio.ErrNoBootstrapInfo):
			return fmt.Errorf("%v: bootstrap info %+v (%v), want none", k, bs, err)
		case r.bootstrap != nil && (err != nil || !reflect.DeepEqual(bs, *r.bootstrap)):
			return fmt.Errorf("%v: bootstrap info %+v (%v), want %+v", k, bs, err, *r.bootstrap)
		}
		ss, err := w.GetSnapshot(k.shard, k.replica)
		if err != nil || ss.Index != r.snap.Index || ss.Term != r.snap.Term {
			return fmt.Errorf("%v: snapshot %d/%d (%v), want %d/%d", k, ss.Index, ss.Term, err, r.snap.Index, r.snap.Term)
		}
		rs, err := w.ReadRaftState(k.shard, k.replica, r.snap.Index)
		if !r.hasState {
			if !errors.Is(err, raftio.ErrNoSavedLog) {
				return fmt.Errorf("%v: raft state %+v (%v), want none", k, rs, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("%v: %w", k, err)
		}
		want := raftio.RaftState{State: r.state, FirstIndex: r.snap.Index}
		want.State.Commit = max(r.state.Commit, r.snap.Index)
		if last := r.last(); last > r.snap.Index {
			want.FirstIndex = max(r.log[0].Index, r.snap.Index+1)
			want.EntryCount = last - want.FirstIndex + 1
		}
		if rs != want {
			return fmt.Errorf("%v: raft state %+v, want %+v", k, rs, want)
		}
		if len(r.log) == 0 {
			continue
		}
		got, _, err := w.IterateEntries(nil, 0, k.shard, k.replica, r.log[0].Index, r.last()+4, ^uint64(0))
		if err != nil {
			return fmt.Errorf("%v: %w", k, err)
		}
		if len(got) != len(r.log) {
			return fmt.Errorf("%v: %d entries from %d, want %d", k, len(got), r.log[0].Index, len(r.log))
		}
		for i := range got {
			if e := r.log[i]; got[i].Index != e.Index || got[i].Term != e.Term || string(got[i].Cmd) != string(e.Cmd) {
				return fmt.Errorf("%v: entry %d is %d/%d, want %d/%d", k, e.Index, got[i].Index, got[i].Term, e.Index, e.Term)
			}
		}
	}
	return nil
}

// powerRun is one workload and what it wrote.
type powerRun struct {
	t    testing.TB
	seed int64
	rng  *rand.Rand
	fs   *crashfs.FS
	w    *WAL
	keys []nodeKey

	recs  []walRec
	acked int      // records every acknowledged call's records are within
	base  walModel // the model after recs[:baseAt]
	at    int
	term  map[nodeKey]uint64
	model walModel // the model after every record written (drives the workload)
}

func newPowerRun(t testing.TB, seed int64) *powerRun {
	r := &powerRun{t: t, seed: seed, rng: rand.New(rand.NewSource(seed)), fs: crashfs.New(),
		base: walModel{}, model: walModel{}, term: map[nodeKey]uint64{}}
	for s := uint64(1); s <= 5; s++ {
		r.keys = append(r.keys, nodeKey{s, 1})
	}
	r.keys = append(r.keys, nodeKey{3, 2}, nodeKey{9, 4})
	if err := r.fs.MkdirAllSynced(filepath.Dir(powerDir)); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *powerRun) open() {
	w, err := Open(powerDir, powerOpts(flakySpares{r.fs, rand.New(rand.NewSource(r.seed))}))
	if err != nil {
		r.t.Fatalf("seed %d: open: %v", r.seed, err)
	}
	r.w = w
}

// call writes recs with fn; synced: the call promises them durable.
func (r *powerRun) call(recs []walRec, synced bool, fn func() error) {
	r.recs = append(r.recs, recs...)
	for _, rec := range recs {
		r.model.apply(rec)
	}
	if err := fn(); err != nil {
		r.t.Fatalf("seed %d: %v", r.seed, err)
	}
	if synced {
		r.ack(len(r.recs))
	}
}

// ack: the records up to n are durable.
func (r *powerRun) ack(n int) {
	r.acked = n
	for ; r.at < n; r.at++ {
		r.base.apply(r.recs[r.at])
	}
}

func (r *powerRun) nextTerm(k nodeKey) uint64 {
	r.term[k]++
	return r.term[k]
}

// entries makes entries first..first+n-1 of a term, of random sizes.
func entries(rng *rand.Rand, first, n, term uint64) []pb.Entry {
	es := make([]pb.Entry, n)
	for i := range es {
		size := 20 + rng.Intn(500)
		if rng.Intn(12) == 0 {
			size = 3000 + rng.Intn(3000)
		}
		cmd := make([]byte, size)
		rng.Read(cmd)
		es[i] = pb.Entry{Index: first + uint64(i), Term: term, Cmd: cmd}
	}
	return es
}

// step makes one random call.
func (r *powerRun) step() {
	k := r.keys[r.rng.Intn(len(r.keys))]
	m := r.model[k]
	if m == nil || m.bootstrap == nil {
		bs := pb.Bootstrap{Addresses: map[uint64]string{1: fmt.Sprintf("n%d:1", k.shard)}, Type: pb.OnDiskStateMachine}
		r.call([]walRec{{key: k, bootstrap: &bs}}, true, func() error { return r.w.SaveBootstrapInfo(k.shard, k.replica, bs) })
		return
	}
	switch op := r.rng.Intn(100); {
	case op < 55:
		r.saveRound()
	case op < 67 && m.hasState && m.state.Commit < m.last(): // commit only: not synced
		st := m.state
		st.Commit++
		r.call([]walRec{{key: k, state: &st}}, false, func() error {
			return r.w.SaveRaftState([]pb.Update{{ShardID: k.shard, ReplicaID: k.replica, State: st}}, 1)
		})
	case op < 73 && m.hasState: // a new term and vote
		st := pb.State{Term: max(r.nextTerm(k), m.state.Term+1), Vote: uint64(1 + r.rng.Intn(3)), Commit: m.state.Commit}
		r.term[k] = st.Term
		r.call([]walRec{{key: k, state: &st}}, true, func() error {
			return r.w.SaveRaftState([]pb.Update{{ShardID: k.shard, ReplicaID: k.replica, State: st}}, 1)
		})
	case op < 85 && m.hasState && m.state.Commit > m.snap.Index: // snapshot, compaction
		ss := pb.Snapshot{ShardID: k.shard, Index: m.state.Commit, Term: m.state.Term, Type: pb.OnDiskStateMachine}
		r.call([]walRec{{key: k, snap: &ss}}, true, func() error {
			return r.w.SaveSnapshots([]pb.Update{{ShardID: k.shard, ReplicaID: k.replica, Snapshot: ss}})
		})
		if ss.Index > 2 {
			c := ss.Index - 2
			r.call([]walRec{{key: k, compact: c}}, false, func() error { return r.w.RemoveEntriesTo(k.shard, k.replica, c) })
			r.call(nil, false, func() error { _, err := r.w.CompactEntriesTo(k.shard, k.replica, c); return err })
		}
	case op < 88 && m.hasState: // a snapshot from the leader: the log restarts after it
		idx := max(m.last(), m.snap.Index) + uint64(1+r.rng.Intn(5))
		st := pb.State{Term: max(m.state.Term, r.term[k]), Vote: m.state.Vote, Commit: idx}
		ss := pb.Snapshot{ShardID: k.shard, Index: idx, Term: st.Term, Type: pb.OnDiskStateMachine}
		r.call([]walRec{{key: k, snap: &ss, reset: true, state: &st}}, true, func() error {
			return r.w.SaveRaftState([]pb.Update{{ShardID: k.shard, ReplicaID: k.replica, State: st, Snapshot: ss}}, 1)
		})
	case op < 89:
		r.call([]walRec{{key: k, remove: true}}, true, func() error { return r.w.RemoveNodeData(k.shard, k.replica) })
		r.term[k] = 0
	case op < 90 && m.hasState: // a replica rebuilt from a snapshot
		ss := pb.Snapshot{ShardID: k.shard, Index: max(m.last(), m.snap.Index) + 7, Term: max(m.state.Term, 1), Type: pb.OnDiskStateMachine,
			Membership: pb.Membership{Addresses: map[uint64]string{1: "x:1"}}}
		bs := pb.Bootstrap{Join: true, Type: ss.Type}
		st := pb.State{Term: ss.Term, Commit: ss.Index}
		r.call([]walRec{{key: k, remove: true, bootstrap: &bs, state: &st, snap: &ss, reset: true}}, true,
			func() error { return r.w.ImportSnapshot(ss, k.replica) })
	case op < 93: // a clean restart: Close syncs everything
		r.call(nil, false, r.w.Close)
		r.ack(len(r.recs))
		r.open()
	default:
		r.saveRound()
	}
}

// saveRound is a step worker's pass: entries (sometimes replacing a tail,
// in a new term), commits, for a few replicas, in one call.
func (r *powerRun) saveRound() {
	var ups []pb.Update
	var recs []walRec
	synced := false
	perm := r.rng.Perm(len(r.keys))
	for _, i := range perm[:1+r.rng.Intn(4)] {
		k := r.keys[i]
		m := r.model[k]
		if m == nil || m.bootstrap == nil {
			continue
		}
		st := m.state
		if !m.hasState {
			st = pb.State{Term: max(r.nextTerm(k), 1)}
			r.term[k] = st.Term
		}
		first := max(m.last(), m.snap.Index) + 1
		if m.last() > st.Commit+1 && m.last() > m.snap.Index+1 && r.rng.Intn(6) == 0 {
			// A conflict: a new leader's entries replace the uncommitted tail.
			first = max(st.Commit, m.snap.Index) + 1 + uint64(r.rng.Intn(int(m.last()-max(st.Commit, m.snap.Index))))
			st.Term = max(r.nextTerm(k), st.Term+1)
			r.term[k] = st.Term
		}
		es := entries(r.rng, first, uint64(1+r.rng.Intn(4)), st.Term)
		if last := es[len(es)-1].Index; r.rng.Intn(2) == 0 && st.Commit < first-1 {
			st.Commit = min(st.Commit+uint64(1+r.rng.Intn(3)), first-1, last)
		}
		if !m.hasState || st.Term != m.state.Term || st.Vote != m.state.Vote || len(es) > 0 {
			synced = true
		}
		ups = append(ups, pb.Update{ShardID: k.shard, ReplicaID: k.replica, State: st, EntriesToSave: es})
		stc := st
		recs = append(recs, walRec{key: k, state: &stc, ents: es})
		r.model.apply(recs[len(recs)-1])
	}
	if len(ups) == 0 {
		return
	}
	// r.model has these records already (applied one by one above).
	r.recs = append(r.recs, recs...)
	if err := r.w.SaveRaftState(ups, 1); err != nil {
		r.t.Fatalf("seed %d: %v", r.seed, err)
	}
	if synced {
		r.ack(len(r.recs))
	}
}

// crashPoint is one operation after which power is cut.
type crashPoint struct {
	op    crashfs.Op
	state *crashfs.State
	acked int      // records of the calls acknowledged before it
	upTo  int      // records written (the call in flight's included)
	base  walModel // the model after recs[:acked]
}

// verify opens the image of p in mode m and checks it against the model.
func (r *powerRun) verify(p *crashPoint, m crashfs.Mode, more, explain bool) error {
	rng := rand.New(rand.NewSource(r.seed*7919 + int64(p.op.N)*31 + int64(m)))
	img := p.state.Image(m, rng)
	w, err := Open(powerDir, powerOpts(img))
	if err != nil {
		return fmt.Errorf("the store does not open: %w", err)
	}
	defer func() { w.Close() }()
	model := p.base.clone()
	for k := p.acked; model.matches(w, r.keys) != nil; k++ {
		if k == p.upTo {
			if !explain {
				return errors.New("the store matches no allowed prefix of the records")
			}
			return r.explain(p, w)
		}
		model.apply(r.recs[k])
	}
	if !more {
		return nil
	}
	// The recovered store goes on: a synced write, a clean restart.
	key := r.keys[int(p.op.N)%len(r.keys)]
	rm := model[key]
	if rm == nil || !rm.hasState || rm.bootstrap == nil {
		return nil
	}
	st := rm.state
	st.Term++
	es := entries(rng, max(rm.last(), rm.snap.Index)+1, 2, st.Term)
	if err := w.SaveRaftState([]pb.Update{{ShardID: key.shard, ReplicaID: key.replica, State: st, EntriesToSave: es}}, 1); err != nil {
		return fmt.Errorf("after recovery: %w", err)
	}
	model.apply(walRec{key: key, state: &st, ents: es})
	if err := w.Close(); err != nil {
		return err
	}
	if w, err = Open(powerDir, powerOpts(img)); err != nil {
		return fmt.Errorf("reopen after recovery: %w", err)
	}
	if err := model.matches(w, r.keys); err != nil {
		return fmt.Errorf("after recovery, a write and a restart: %w", err)
	}
	return nil
}

// explain says how a store that matches no allowed prefix differs: which
// earlier prefix it matches (acknowledged records lost), or what differs
// from the acknowledged state.
func (r *powerRun) explain(p *crashPoint, w *WAL) error {
	diff := p.base.matches(w, r.keys)
	model := walModel{}
	for k := 0; k < p.acked; k++ {
		if model.matches(w, r.keys) == nil {
			return fmt.Errorf("lost acknowledged records: the store holds the first %d of %d acknowledged records (%v)",
				k, p.acked, diff)
		}
		model.apply(r.recs[k])
	}
	return fmt.Errorf("the store matches no prefix of the %d records written (%d acknowledged): %v", p.upTo, p.acked, diff)
}

// powerLoss runs one seed's workload and checks a power cut after the
// operations chosen (every one when points is 0); it returns how many
// images it checked and the failures.
func powerLoss(t testing.TB, seed int64, steps, points int, allModes bool) (checked int, failures []string) {
	every := 1
	if points > 0 {
		// A first run counts the operations, so that the points are spread.
		r := newPowerRun(t, seed)
		r.workload(steps)
		every = max(1, r.fs.Ops()/points)
	}
	offset := int(seed % int64(every))
	r := newPowerRun(t, seed)
	r.fs.SetHook(func(op crashfs.Op) bool { return op.N%every == offset }, func(op crashfs.Op, st *crashfs.State) {
		p := &crashPoint{op: op, state: st, acked: r.acked, upTo: len(r.recs), base: r.base}
		modes := []crashfs.Mode{crashfs.Modes[(op.N/every)%len(crashfs.Modes)]}
		if allModes {
			modes = crashfs.Modes
		}
		for _, m := range modes {
			checked++
			if err := r.verify(p, m, checked%4 == 0, len(failures) < 5); err != nil {
				failures = append(failures, fmt.Sprintf("seed %d, power cut after %v, mode %v: %v", seed, op, m, err))
			}
		}
	})
	r.workload(steps)
	return checked, failures
}

func (r *powerRun) workload(steps int) {
	r.open()
	for range steps {
		r.step()
	}
	r.call(nil, false, r.w.Close)
	r.ack(len(r.recs))
}

func TestPowerLossAtEveryOperation(t *testing.T) {
	if skipRotationDirSync {
		t.Skip("built with the crashbug tag: TestPowerLossCatchesASkippedDirectorySync runs instead")
	}
	crashfs.Run(t, crashfs.Plan{Seeds: 2, Steps: 260}, "every store opened and held every acknowledged record",
		func(seed int64, p crashfs.Plan) (int, []string) {
			return powerLoss(t, seed, p.Steps, p.Points, p.AllModes)
		})
}

// powerLossAt checks one crash point of one seed's workload in one mode.
func powerLossAt(t testing.TB, seed int64, steps, op int, m crashfs.Mode) error {
	r := newPowerRun(t, seed)
	var err error
	hit := false
	r.fs.SetHook(func(o crashfs.Op) bool { return o.N == op }, func(o crashfs.Op, st *crashfs.State) {
		hit = true
		err = r.verify(&crashPoint{op: o, state: st, acked: r.acked, upTo: len(r.recs), base: r.base}, m, true, true)
	})
	r.workload(steps)
	if !hit {
		return fmt.Errorf("seed %d: the workload has no operation %d", seed, op)
	}
	return err
}

// Crash points that found bugs, kept as regression cases (each failed
// before its fix).
var powerRegressions = []struct {
	name  string
	seed  int64
	steps int
	op    int
	mode  crashfs.Mode
}{
	// The store's directory was created and never synced in its parent:
	// the first acknowledged records vanished with it.
	{"new store directory", 932276291, 260, 16, crashfs.Synced},
	// ImportSnapshot wrote a remove record and then the replica's new
	// record in one write: a torn write kept the first only, and the
	// replica was gone, neither its old nor its new self.
	{"import torn between its records", 252087645, 600, 1063, crashfs.Torn},
}

func TestPowerLossRegressions(t *testing.T) {
	for _, c := range powerRegressions {
		t.Run(c.name, func(t *testing.T) {
			if err := powerLossAt(t, c.seed, c.steps, c.op, c.mode); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A new store's directory survives a power loss right after its first
// acknowledged write: the directory's entry in its parent is synced.
func TestNewStoreDirectoryIsDurable(t *testing.T) {
	fs := crashfs.New()
	must(t, fs.MkdirAllSynced(filepath.Dir(powerDir)))
	w, err := Open(powerDir, powerOpts(fs))
	must(t, err)
	bs := pb.Bootstrap{Addresses: map[uint64]string{1: "a:1"}, Type: pb.OnDiskStateMachine}
	must(t, w.SaveBootstrapInfo(1, 1, bs))
	img := fs.Capture().Image(crashfs.Synced, nil)
	w.Close()
	w, err = Open(powerDir, powerOpts(img))
	must(t, err)
	defer w.Close()
	if got, err := w.GetBootstrapInfo(1, 1); err != nil || !reflect.DeepEqual(got, bs) {
		t.Fatalf("after a power loss: bootstrap info %+v, %v", got, err)
	}
}
