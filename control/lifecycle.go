package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/lni/dragonboat/v4"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// Data shards created and retired at runtime (the lifecycle is described
// in placement/lifecycle.go). Every node runs shardDuties each placement
// round with the table it just read: it starts its replica of a shard being
// created, and stops and deletes its replica of a shard being stopped, then
// reports that. The meta leader runs driveShards: it waits for a created
// shard's group to commit a proposal and marks it active, fills it with
// ranges, moves a retiring shard's ranges out and stops it. Every step is
// recorded before the next begins and every action is repeated harmlessly,
// so a crash of the driver or of any node resumes where the table stands.

// Steps reported to HostConfig.ShardHook after the driver recorded them.
const (
	ShardStepCreated   = "created"   // a create was recorded (the operator's or the policy's)
	ShardStepActivated = "activated" // the new group committed a proposal; recorded active
	ShardStepFilled    = "filled"    // the new shard holds its share of ranges
	ShardStepRetiring  = "retiring"  // a retirement was recorded
	ShardStepEmptied   = "emptied"   // a retiring shard's ranges are all moved out; it is recorded stopping
	ShardStepRemoved   = "removed"   // a node removed its replica's data and recorded it
)

// DefaultCreateTimeout is how long a created shard may go without a
// committed proposal before the driver rolls its creation back.
const DefaultCreateTimeout = 2 * time.Minute

// lifecycleState is the meta leader's memory of the shards it is creating
// and of the range moves it started for the lifecycle.
type lifecycleState struct {
	creatingSince map[uint64]time.Time
	// last is the range move the driver started last; refused the
	// (range start, target shard) pairs whose move was rolled back. A move
	// is refused when a single-lock lease of the range has a token some
	// lock of the target shard uses too (a single lease's id is its
	// token): another target takes the range, or the move is tried again
	// once every target refused it (single-lock leases end with their
	// lock).
	last    lifecycleMove
	refused map[lifecycleMove]bool
	// fillRounds counts the rounds spent filling each new shard.
	fillRounds map[uint64]int
}

// lifecycleMove is a range (by its start) moved to a shard.
type lifecycleMove struct {
	id    uint64
	start string
	to    uint64
}

// noteRolledBack records the last lifecycle move as refused when it
// ended without its range reaching the target.
func (l *lifecycleState) noteRolledBack(t *placement.Table) {
	if l.last.id == 0 {
		return
	}
	if _, inFlight := t.MoveOf(l.last.id); inFlight {
		return
	}
	done := false
	for _, r := range t.Ranges {
		if r.Start == l.last.start && r.Shard == l.last.to {
			done = true
		}
	}
	if !done {
		if l.refused == nil {
			l.refused = map[lifecycleMove]bool{}
		}
		l.refused[lifecycleMove{start: l.last.start, to: l.last.to}] = true
	}
	l.last = lifecycleMove{}
}

// started remembers a lifecycle move the driver started.
func (l *lifecycleState) started(id uint64, start string, to uint64) {
	l.last = lifecycleMove{id: id, start: start, to: to}
}

func (l *lifecycleState) wasRefused(start string, to uint64) bool {
	return l.refused[lifecycleMove{start: start, to: to}]
}

// OnReplicasChanged registers f to be called (on its own goroutine) each
// time a local replica starts or is removed: the node's metrics follow
// the replicas it hosts. nil unregisters it.
func (h *Host) OnReplicasChanged(f func()) {
	if f == nil {
		h.replicasChanged.Store(nil)
		return
	}
	h.replicasChanged.Store(&f)
}

func (h *Host) replicasChangedNotify() {
	if f := h.replicasChanged.Load(); f != nil {
		go (*f)()
	}
}

// shardHook reports a recorded lifecycle step to the test hook.
func (h *Host) shardHook(shard uint64, step string) error {
	if h.cfg.ShardHook != nil {
		h.cfg.ShardHook(shard, step, h.stopc)
	}
	if h.stopping() {
		return errStopped
	}
	return nil
}

// shardDuties does this node's part of the lifecycle.
func (h *Host) shardDuties(ctx context.Context, t *placement.Table) {
	self := h.cfg.NodeID
	for _, si := range t.Shards {
		// A replica of a shard created at runtime, on one of its initial
		// nodes, that this node does not run: the shard is being created,
		// or this node was down while it was (its replica never started,
		// so it never voted, and it joins from the initial member list;
		// a replica that did start restarts from its data).
		if !si.Runtime || !si.Has(self) || si.RID(self) != self {
			continue
		}
		if _, ok := h.Shard(si.ID); ok {
			continue
		}
		if m, moving := t.Move(si.ID); moving && m.To == self {
			continue // a replica move's target starts it (replicas.go)
		}
		members := map[uint64]dragonboat.Target{}
		for _, n := range si.Replicas {
			node, ok := t.Node(n)
			if !ok {
				h.log.Warn("a new shard's replica is on an unregistered node", "shard", si.ID, "node", n)
				return
			}
			members[si.RID(n)] = node.RaftAddr
		}
		r := localReplica{Shard: si.ID, RID: si.RID(self), New: true}
		if err := h.addInitial(r, members); err != nil {
			h.log.Warn("starting a new shard's replica failed", "shard", si.ID, "err", err)
			continue
		}
		h.log.Info("new shard's replica started", "shard", si.ID, "rid", r.RID, "members", len(members))
	}
	// A replica of a shard whose id was given out and that the table no
	// longer lists at all (its retired record was trimmed while this node
	// was away) is stopped and removed too.
	for _, id := range h.ShardIDs() {
		_, listed := t.Shard(id)
		_, retired := t.RetiredOf(id)
		if listed || retired || t.NextShard == 0 || id >= t.NextShard {
			continue
		}
		if s, ok := h.Shard(id); ok {
			if err := h.removeLocal(ctx, s); err != nil {
				h.log.Warn("removing a forgotten shard's replica failed", "shard", id, "err", err)
			} else {
				h.log.Info("replica of a shard no longer in the table removed", "shard", id)
			}
		}
	}
	for _, rs := range t.Retired {
		s, local := h.Shard(rs.ID)
		if local {
			if err := h.removeLocal(ctx, s); err != nil {
				h.log.Warn("removing a retired shard's replica failed", "shard", rs.ID, "err", err)
				continue
			}
			h.log.Info("retired shard's replica stopped and its data removed", "shard", rs.ID, "rid", s.RID())
		}
		if !slices.Contains(rs.Pending, self) {
			continue
		}
		if _, err := h.metaProposeResult(ctx, placement.EncodeShard(placement.ShardCommand{Op: "removed", Shard: rs.ID, Node: self})); err != nil {
			h.log.Warn("recording a retired shard's replica removed failed", "shard", rs.ID, "err", err)
			continue
		}
		_ = h.shardHook(rs.ID, ShardStepRemoved)
	}
}

// addInitial records a new shard's replica in the manifest and starts it
// with the shard's initial member list. A crash between the record and
// the start leaves a record restart cannot start (New): restart drops it
// and this node's duties start it again.
func (h *Host) addInitial(r localReplica, members map[uint64]dragonboat.Target) error {
	h.placeMu.Lock()
	defer h.placeMu.Unlock()
	if _, ok := h.Shard(r.Shard); ok {
		return nil
	}
	h.man.set(r)
	if err := h.man.save(h.cfg.DataDir); err != nil {
		return err
	}
	if err := h.startData(r, members, false); err != nil {
		h.man.drop(r.Shard)
		_ = h.man.save(h.cfg.DataDir)
		return err
	}
	r.New = false // dragonboat has recorded the member list: a restart finds it
	h.man.set(r)
	return h.man.save(h.cfg.DataDir)
}

// driveShards runs the lifecycle on the meta leader: at most one step that
// touches the range table per round (range moves go one at a time).
func (h *Host) driveShards(t *placement.Table) {
	if h.Leader(placement.MetaShard) != h.cfg.NodeID {
		h.life = lifecycleState{}
		return
	}
	if h.life.creatingSince == nil {
		h.life.creatingSince = map[uint64]time.Time{}
	}
	h.life.noteRolledBack(t)
	for id := range h.life.creatingSince {
		if si, ok := t.Shard(id); !ok || si.State != placement.ShardCreating {
			delete(h.life.creatingSince, id)
		}
	}
	for _, si := range t.Shards {
		var err error
		switch {
		case si.State == placement.ShardCreating:
			err = h.activate(t, si)
		case si.State == placement.ShardRetiring:
			err = h.empty(t, si)
		case si.State == placement.ShardActive && si.Fill:
			err = h.fill(t, si)
		default:
			continue
		}
		if errors.Is(err, errStopped) {
			return
		}
		if err != nil {
			h.log.Warn("shard lifecycle step stalled; will retry", "shard", si.ID, "state", si.State, "err", err)
		}
	}
}

// activate waits for a created shard's group to commit a proposal (an
// empty SetRanges: it owns nothing yet), then records it active; past the
// create timeout it rolls the creation back.
func (h *Host) activate(t *placement.Table, si placement.ShardInfo) error {
	since, ok := h.life.creatingSince[si.ID]
	if !ok {
		since = time.Now()
		h.life.creatingSince[si.ID] = since
	}
	octx, ocancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err := h.shardOp(octx, si.ID, &wire.Request{Op: wire.OpSetRanges, Gen: t.Gen})
	ocancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err != nil {
		limit := h.cfg.CreateTimeout
		if limit <= 0 {
			limit = DefaultCreateTimeout
		}
		if time.Since(since) < limit {
			return nil // its replicas are still starting or electing
		}
		why := fmt.Sprintf("no leader after %v: %v", limit.Round(time.Second), err)
		if _, err := h.proposeShard(ctx, placement.ShardCommand{Op: "retire", Shard: si.ID, Reason: why}); err != nil {
			return err
		}
		h.log.Warn("shard creation rolled back", "shard", si.ID, "reason", why)
		return h.shardHook(si.ID, ShardStepRetiring)
	}
	if _, err := h.proposeShard(ctx, placement.ShardCommand{Op: "activate", Shard: si.ID}); err != nil {
		return err
	}
	h.log.Info("shard active", "shard", si.ID, "replicas", si.Replicas, "took", time.Since(since).Round(time.Millisecond))
	delete(h.life.creatingSince, si.ID)
	return h.shardHook(si.ID, ShardStepActivated)
}

// fill evens out the key space once a new shard is active (load is spread
// over the hashed key space, so key space stands for load): each round
// moves one range (planFill), and the shard is filled when no active shard
// is more than a quarter of the fair share (1/active shards) from it, or
// after maxFillRounds rounds.
func (h *Host) fill(t *placement.Table, si placement.ShardInfo) error {
	if len(t.RangeMoves) > 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if h.life.fillRounds == nil {
		h.life.fillRounds = map[uint64]int{}
	}
	h.life.fillRounds[si.ID]++
	a := planFill(t, si.ID, h.life.wasRefused)
	if a.op == "" || h.life.fillRounds[si.ID] > maxFillRounds {
		if _, err := h.proposeShard(ctx, placement.ShardCommand{Op: "filled", Shard: si.ID}); err != nil {
			return err
		}
		delete(h.life.fillRounds, si.ID)
		h.log.Info("new shard filled", "shard", si.ID, "ranges", len(t.RangesOf(si.ID)), "share", fmt.Sprintf("%.3f", keyShares(t)[si.ID]))
		return h.shardHook(si.ID, ShardStepFilled)
	}
	if a.op == "split" {
		_, err := h.RangeCommand(ctx, placement.RangeCommand{Op: "split", Key: a.key})
		if err == nil {
			h.log.Info("split a range to even out the shards", "shard", si.ID, "from_shard", a.from, "key", fmt.Sprintf("%x", a.key))
		}
		return err
	}
	id, err := h.RangeCommand(ctx, placement.RangeCommand{Op: "move", Key: a.key, Shard: a.shard})
	if err == nil {
		h.life.started(id, a.key, a.shard)
		h.log.Info("moving a range to even out the shards", "shard", si.ID, "from_shard", a.from, "to_shard", a.shard, "move", id)
	}
	return err
}

// fillAction is one round of filling: split at key, move the range that
// starts at key from shard from to shard, or nothing left to do (op "").
type fillAction struct {
	op    string
	key   string
	from  uint64
	shard uint64
}

// keyShares is the part of the key space each shard holds.
func keyShares(t *placement.Table) map[uint64]float64 {
	share := map[uint64]float64{}
	for _, r := range t.Ranges {
		share[r.Shard] += wire.RangeShare(r.Start, r.End)
	}
	return share
}

// planFill picks the next step that evens out the key space after shard
// fresh became active. The receiver is fresh while it lacks more than a
// quarter of the fair share, else the active shard with the least key
// space; the donor is the one with the most. It moves the donor's largest
// range that brings the two closest to even without overshooting by more
// than a quarter, or, when every range is too large, splits the donor's
// largest in two. Nothing once the donor and receiver are within a
// quarter of the fair share of each other (refused: a move of that range
// to that shard was refused before).
func planFill(t *placement.Table, fresh uint64, refused func(start string, to uint64) bool) fillAction {
	active := t.ActiveShards()
	if len(active) < 2 {
		return fillAction{}
	}
	share := keyShares(t)
	fair := 1 / float64(len(active))
	tol := fair / 4
	var donor, least uint64
	for _, s := range active {
		if donor == 0 || share[s.ID] > share[donor] {
			donor = s.ID
		}
		if least == 0 || share[s.ID] < share[least] {
			least = s.ID
		}
	}
	to := least
	want := (share[donor] - share[least]) / 2 // moving it makes the two even
	if lack := fair - share[fresh]; lack > tol {
		to, want = fresh, min(lack, (share[donor]-share[fresh])/2)
	}
	if donor == to || share[donor]-share[to] <= tol {
		return fillAction{}
	}
	var pick, largest *wire.Range
	rs := t.RangesOf(donor)
	for i := range rs {
		r := &rs[i]
		sh := wire.RangeShare(r.Start, r.End)
		if largest == nil || sh > wire.RangeShare(largest.Start, largest.End) {
			largest = r
		}
		if sh <= want+tol/2 && !refused(r.Start, to) && (pick == nil || sh > wire.RangeShare(pick.Start, pick.End)) {
			pick = r
		}
	}
	if pick != nil {
		return fillAction{op: "move", key: pick.Start, from: donor, shard: to}
	}
	if largest == nil {
		return fillAction{}
	}
	key, ok := midKey(largest.Start, largest.End)
	if !ok {
		return fillAction{} // nothing left to cut
	}
	return fillAction{op: "split", key: key, from: donor}
}

// maxFillRounds bounds the splits and moves that fill one new shard.
const maxFillRounds = 32

// empty moves a retiring shard's ranges out, one move at a time, each to
// the active shard with the least key space; once it holds none it is
// recorded stopping (every node then removes its replica).
func (h *Host) empty(t *placement.Table, si placement.ShardInfo) error {
	if len(t.RangeMoves) > 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rs := t.RangesOf(si.ID)
	if len(rs) == 0 {
		if _, err := h.proposeShard(ctx, placement.ShardCommand{Op: "stop", Shard: si.ID}); err != nil {
			return err
		}
		h.log.Info("retiring shard emptied; its replicas stop", "shard", si.ID)
		return h.shardHook(si.ID, ShardStepEmptied)
	}
	active := t.ActiveShards()
	if len(active) == 0 {
		return fmt.Errorf("no active shard to take the ranges of shard %d", si.ID)
	}
	share := map[uint64]float64{}
	for _, r := range t.Ranges {
		share[r.Shard] += wire.RangeShare(r.Start, r.End)
	}
	sort.SliceStable(active, func(i, j int) bool { return share[active[i].ID] < share[active[j].ID] })
	var to uint64
	for _, a := range active {
		if !h.life.wasRefused(rs[0].Start, a.ID) {
			to = a.ID
			break
		}
	}
	if to == 0 {
		// Every active shard refused the range: try them all again
		// (the single-lock leases in the way end with their locks).
		h.log.Warn("retiring shard: every active shard refused its range; trying again", "shard", si.ID,
			"range", fmt.Sprintf("%x", rs[0].Start))
		for k := range h.life.refused {
			if k.start == rs[0].Start {
				delete(h.life.refused, k)
			}
		}
		return nil
	}
	id, err := h.RangeCommand(ctx, placement.RangeCommand{Op: "move", Key: rs[0].Start, Shard: to})
	if err == nil {
		h.life.started(id, rs[0].Start, to)
		h.log.Info("moving a range out of a retiring shard", "shard", si.ID, "to_shard", to, "move", id)
	}
	return err
}

// proposeShard proposes a lifecycle command, stamped with this node's
// clock for the decision record.
func (h *Host) proposeShard(ctx context.Context, c placement.ShardCommand) (uint64, error) {
	c.At = time.Now().UnixMilli()
	v, err := h.metaProposeResult(ctx, placement.EncodeShard(c))
	if err == nil {
		h.RefreshTable(ctx)
	}
	return v, err
}

// CreateShard records a new data shard on nodes (none: the policy's
// choice, placeNewShard) and returns its id; the meta leader starts it,
// marks it active once its group has a leader, and, with fill, moves
// ranges into it. Errors are typed: unknown node (NotFound), a draining or
// repeated node, too many (InvalidArgument).
func (h *Host) CreateShard(ctx context.Context, nodes []uint64, fill bool, reason string) (uint64, error) {
	t, err := h.RefreshTable(ctx)
	if err != nil {
		return 0, err
	}
	if t == nil {
		return 0, wire.Errorf(wire.Unavailable, "no range table yet")
	}
	if len(nodes) == 0 {
		nodes = placeNewShard(t, h.replicationFactor(t), h.leaderCounts(t))
		if len(nodes) == 0 {
			return 0, wire.Errorf(wire.Unavailable, "no active node to place a shard on")
		}
	}
	if len(nodes) > placement.MaxShardReplicas {
		return 0, wire.Errorf(wire.InvalidArgument, "a shard has at most %d replicas, %d nodes given", placement.MaxShardReplicas, len(nodes))
	}
	seen := map[uint64]bool{}
	for _, n := range nodes {
		node, ok := t.Node(n)
		switch {
		case !ok:
			return 0, wire.Errorf(wire.NotFound, "node %d is not a cluster member", n)
		case node.State == placement.NodeDraining:
			return 0, wire.Errorf(wire.InvalidArgument, "node %d is draining: it takes no new replica", n)
		case seen[n]:
			return 0, wire.Errorf(wire.InvalidArgument, "node %d is named twice", n)
		}
		seen[n] = true
	}
	id, err := h.proposeShard(ctx, placement.ShardCommand{Op: "create", Nodes: nodes, Fill: fill, Reason: reason})
	if err != nil {
		return 0, err
	}
	h.log.Info("shard creation recorded", "shard", id, "nodes", nodes, "reason", reason)
	return id, h.shardHook(id, ShardStepCreated)
}

// RetireShard records a data shard's retirement: the meta leader moves its
// ranges to the other active shards, then its replicas stop and their data
// is removed. A shard still being created is rolled back at once. Errors
// are typed: no such shard (NotFound); already retiring, stopping or
// retired, or the last active shard (InvalidArgument).
func (h *Host) RetireShard(ctx context.Context, id uint64, reason string) error {
	t, err := h.RefreshTable(ctx)
	if err != nil {
		return err
	}
	if t == nil {
		return wire.Errorf(wire.Unavailable, "no range table yet")
	}
	si, ok := t.Shard(id)
	if !ok {
		if rs, gone := t.RetiredOf(id); gone {
			return wire.Errorf(wire.InvalidArgument, "shard %d is already %v", id, rs.State())
		}
		if id == placement.MetaShard {
			return wire.Errorf(wire.InvalidArgument, "shard %d is the meta group, not a data shard", id)
		}
		return wire.Errorf(wire.NotFound, "no data shard %d", id)
	}
	switch {
	case si.State == placement.ShardRetiring:
		return wire.Errorf(wire.InvalidArgument, "shard %d is already retiring (%d ranges still to move out)", id, len(t.RangesOf(id)))
	case si.State == placement.ShardActive && len(t.ActiveShards()) <= 1:
		return wire.Errorf(wire.InvalidArgument, "shard %d is the last active shard: a cluster needs one", id)
	}
	if _, err := h.proposeShard(ctx, placement.ShardCommand{Op: "retire", Shard: id, Reason: reason}); err != nil {
		return err
	}
	h.log.Info("shard retirement recorded", "shard", id, "reason", reason)
	return h.shardHook(id, ShardStepRetiring)
}

// replicationFactor is how many replicas a new shard gets: the
// configured factor, else as many as the cluster's active shards have
// (every initial member, by default), never more than the active nodes.
func (h *Host) replicationFactor(t *placement.Table) int {
	rf := h.cfg.Replicas
	if rf <= 0 {
		for _, s := range t.ActiveShards() {
			rf = max(rf, len(s.Replicas))
		}
	}
	if rf <= 0 {
		rf = 3
	}
	return min(rf, len(t.ActiveNodes()), placement.MaxShardReplicas)
}

// leaderCounts is how many shard leaderships each node holds, as this node
// knows them.
func (h *Host) leaderCounts(t *placement.Table) map[uint64]int {
	out := map[uint64]int{}
	for _, s := range t.Shards {
		if l := h.Leader(s.ID); l != 0 {
			out[l]++
		}
	}
	return out
}

// placeNewShard chooses rf active nodes for a new shard: the ones holding
// the fewest replicas, then the fewest leaderships, then the lowest ids.
func placeNewShard(t *placement.Table, rf int, leaders map[uint64]int) []uint64 {
	nodes := t.ActiveNodes()
	sort.SliceStable(nodes, func(i, j int) bool {
		a, b := nodes[i], nodes[j]
		if ra, rb := t.ReplicaCount(a), t.ReplicaCount(b); ra != rb {
			return ra < rb
		}
		if leaders[a] != leaders[b] {
			return leaders[a] < leaders[b]
		}
		return a < b
	})
	if rf < len(nodes) {
		nodes = nodes[:rf]
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	return nodes
}
