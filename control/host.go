package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/internal/diskfs"
	"github.com/wardenlock/warden/internal/raftwal"
	"github.com/wardenlock/warden/lease"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/raftnode"
	"github.com/wardenlock/warden/shard"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// HostConfig configures one node.
type HostConfig struct {
	NodeID     uint64
	RaftAddr   string // this node's Raft identity: what the member lists name
	RaftListen string // where Raft actually listens ("" = RaftAddr); differs when a proxy sits in front
	ClientAddr string // advertised client (router) address
	AdminAddr  string // advertised admin HTTP address
	DataDir    string
	// Members maps node id to Raft address for every initial member. The
	// same map must be given to every member; it is ignored on restart.
	Members map[uint64]string
	// DataShards is the number of data shards (ids 2 .. DataShards+1), each
	// replicated on every initial member.
	DataShards     int
	NamespaceDepth int

	RTT             time.Duration // dragonboat tick (default 10 ms)
	ElectionRTT     uint64        // ticks (default 15)
	HeartbeatRTT    uint64        // ticks (default 3)
	SnapshotEntries uint64        // entries between snapshots (default 100000; see DefaultSnapshotEntries)
	DeploymentID    uint64
	NoLeaderBalance bool // leave shard leaders wherever elections put them
	// Ranges tunes automatic splits and range rebalancing (autosplit.go).
	Ranges RangePolicy
	// MoveHook, for tests, hears each range-move step the driver finished
	// on this node; stop is closed when the host is closing.
	MoveHook func(move uint64, step placement.RangeStep, stop <-chan struct{})
	// ShardHook, for tests, hears each shard lifecycle step (ShardStep…)
	// recorded on this node; stop is closed when the host is closing.
	ShardHook func(shard uint64, step string, stop <-chan struct{})
	// CreateTimeout bounds how long a created shard may go without a
	// leader before its creation is rolled back (default
	// DefaultCreateTimeout). Policy runs the automatic shard count
	// (policy.go).
	CreateTimeout time.Duration
	Policy        ShardPolicy
	// Engine shape, fixed when a data dir is created (dragonboat pins it).
	ApplyWorkers uint64 // state machine apply workers (default 4)
	// LogFS is the file system the Raft log store works through (nil:
	// the disk); tests pass one that can lose power.
	LogFS diskfs.FS
	// CommitHold is how long the Raft transport holds a commit-only
	// Replicate (0: raftnode.DefaultCommitHold; negative: none is held).
	CommitHold time.Duration

	SM    statemachine.Config
	Shard shard.Config
	Clock lease.Clock
	Log   *slog.Logger

	// MutualTLS turns on dragonboat's mutual TLS for Raft traffic: every
	// peer must present a certificate signed by CAFile.
	MutualTLS                 bool
	CAFile, CertFile, KeyFile string

	// Replicas is the replication factor of the data shards a new cluster
	// is created with (0 = every initial member holds every shard). Shard
	// i's replicas are Replicas consecutive members from member i on.
	Replicas int

	// Join: this node joins a running cluster instead of bootstrapping one.
	// It starts no replica until JoinCluster has registered it (join.go);
	// Members and DataShards are then ignored.
	Join bool

	// Restore, when set, fills a new cluster from a backup (restore.go).
	Restore *RestorePlan
	// Recorder, when set, receives every applied event of every data shard
	// (the node's audit store) and serves watches their older history.
	Recorder shard.Recorder
}

func (c *HostConfig) fill() error {
	if c.NodeID == 0 {
		return errors.New("shard: node id must be non-zero")
	}
	if c.DataDir == "" || c.RaftAddr == "" {
		return errors.New("shard: data dir and raft address are required")
	}
	if _, ok := c.Members[c.NodeID]; !ok && !c.Join {
		return fmt.Errorf("shard: node %d is not in the member list", c.NodeID)
	}
	if c.NodeID > placement.MaxNodeID {
		return fmt.Errorf("shard: node id %d is over %d", c.NodeID, placement.MaxNodeID)
	}
	if c.DataShards <= 0 {
		c.DataShards = 8
	}
	if c.NamespaceDepth <= 0 {
		c.NamespaceDepth = 2
	}
	if c.RTT <= 0 {
		c.RTT = 10 * time.Millisecond
	}
	if c.ElectionRTT == 0 {
		c.ElectionRTT = 15
	}
	if c.HeartbeatRTT == 0 {
		// Every leader heartbeats each follower of each shard: with 16
		// shards that was most of an idle node's CPU at 2 ticks. 3 ticks
		// (30 ms) cuts a third of it and still gives 5 rounds per
		// election timeout, which CheckQuorum needs on a starved machine
		// (at 4-5 ticks leaderships moved more often under heavy CPU
		// contention); ReadIndex (keepalives) sends its own round at once.
		c.HeartbeatRTT = 3
	}
	if c.Shard.LeaseAllowance <= 0 {
		// One election timeout (elections are randomized in [E, 2E) ticks).
		c.Shard.LeaseAllowance = time.Duration(c.ElectionRTT) * c.RTT
	}
	if c.ApplyWorkers == 0 {
		c.ApplyWorkers = 4
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = DefaultSnapshotEntries
	}
	if c.DeploymentID == 0 {
		c.DeploymentID = 7070
	}
	if c.Clock == nil {
		c.Clock = lease.SystemClock{}
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	// Zero fields take their defaults, the others stay (a lock-delay or
	// a quota set alone is kept).
	c.SM = c.SM.WithDefaults()
	c.SM.SplitDepth = c.NamespaceDepth
	if err := c.Policy.Validate(); err != nil {
		return err
	}
	if c.Restore != nil {
		// A restored cluster starts with the backup's data shards, under
		// their ids (shards created and retired at runtime leave gaps).
		ids := c.Restore.shardIDs()
		c.DataShards = len(ids)
		if err := c.Restore.check(ids, c.NamespaceDepth); err != nil {
			return err
		}
	}
	return c.SM.Validate()
}

// Host is one node's NodeHost with its replicas of the meta group and of
// the data shards placed on it.
type Host struct {
	cfg    HostConfig
	nh     *dragonboat.NodeHost
	log    *slog.Logger
	shards atomic.Pointer[map[uint64]*shard.Shard] // local data replicas; copy on write under placeMu

	placeMu     sync.Mutex // starting and stopping replicas, the manifest
	man         *manifest
	metaStarted atomic.Bool
	holdMovesAt atomic.Uint32 // test hook (replicas.go)

	mu          sync.RWMutex
	table       *placement.Table
	leaders     map[uint64]uint64    // shard → leader replica id
	leaderSince map[uint64]time.Time // shard → when its leadership last changed
	remote      map[uint64]uint64    // shard without a local replica → leader node, as last heard (transfer.go)
	remoteSince map[uint64]time.Time // shard without a local replica → when a change of its leader was heard

	balanceOff  atomic.Bool    // the leader balancer is off (HostConfig.NoLeaderBalance, SetLeaderBalance)
	lastBalance time.Time      // placement loop only
	sampler     rangeSampler   // placement loop only (autosplit.go)
	life        lifecycleState // placement loop only (lifecycle.go)
	policy      policyMemo     // the shard policy's last reading (policy.go)
	// replicasChanged is called when a local replica starts or goes
	// (OnReplicasChanged).
	replicasChanged atomic.Pointer[func()]

	pendingRestore map[uint64]struct{} // data shards whose restore entry has not applied
	rangeMoves     atomic.Uint64
	forward        atomic.Pointer[Forwarder] // set by the router: reaches shards with no local replica
	nodeCPU        atomic.Pointer[func() map[uint64]cpuload.Reading]
	walStats       *raftwal.Stats // the Raft log store's syncs and rotations

	stopc chan struct{}
	wg    sync.WaitGroup
}

// stepWorkers is the node's Raft step and commit worker count. One worker
// steps every shard of the node in one pass (one log write and one
// fdatasync per pass, one message batch per peer); measured against 2 and
// 4 it was ahead at 1 to 8 leaders, with less CPU per operation and half
// the fdatasyncs. dragonboat records the count among a data dir's hard
// settings, so it is a constant.
const stepWorkers = 1

// Raft messages wait in a queue per peer node before they are sent, and in
// a queue per replica after they arrive, until the step worker takes them.
// dragonboat bounds those queues by count alone (2,048 and 1,024 messages),
// and one message can carry megabytes of entries, so a peer that cannot
// keep up (a replica catching up on a node short of CPU) made its
// senders' and its own queues grow by gigabytes. Over these bounds
// messages are dropped, as if lost on the network: Raft sends them again
// once the peer has caught up (the leader probes the follower's log).
// Under load a queue holds a few milliseconds of traffic, far below them.
const (
	raftSendQueueBytes    = 64 << 20 // per peer node
	raftReceiveQueueBytes = 32 << 20 // per replica
)

// NewHost starts the NodeHost and every replica. It returns once they are
// started; leaders are elected in the background.
func NewHost(cfg HostConfig) (*Host, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	raftnode.RouteLogs(cfg.Log)
	h := &Host{cfg: cfg, log: cfg.Log, leaders: map[uint64]uint64{},
		leaderSince: map[uint64]time.Time{}, remote: map[uint64]uint64{}, remoteSince: map[uint64]time.Time{},
		stopc: make(chan struct{})}
	h.shards.Store(&map[uint64]*shard.Shard{})
	h.balanceOff.Store(cfg.NoLeaderBalance)
	man, err := loadManifest(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	expert := config.GetDefaultExpertConfig()
	// The Raft log is Warden's own store (internal/raftwal): one log per
	// node. dragonboat still records its LogDB settings among the data
	// dir's hard settings, so they stay fixed at one small shard.
	h.walStats = &raftwal.Stats{}
	expert.LogDBFactory = raftnode.CountingLogDBFactory{LogDBFactory: raftwal.Factory{Options: raftwal.Options{Stats: h.walStats, FS: cfg.LogFS}}}
	expert.LogDB = config.GetTinyMemLogDBConfig()
	expert.LogDB.Shards = 1
	// One step worker: it saves the Raft updates of all the node's shards
	// in one call with at most one fdatasync and one message batch per
	// peer, so a node group-commits across shards. With dragonboat's
	// default (16 step workers) every shard syncs its own small batches
	// and throughput falls as shards are added.
	expert.Engine.ExecShards = stepWorkers
	expert.Engine.CommitShards = stepWorkers
	expert.Engine.ApplyShards = cfg.ApplyWorkers
	// One write per Raft message batch and buffered reads (raftnode/transport.go).
	expert.TransportFactory = raftnode.TransportFactory{CommitHold: cfg.CommitHold}
	nhc := config.NodeHostConfig{
		NodeHostDir:         filepath.Join(cfg.DataDir, "raft"),
		RTTMillisecond:      uint64(cfg.RTT / time.Millisecond),
		RaftAddress:         cfg.RaftAddr,
		ListenAddress:       cfg.RaftListen,
		DeploymentID:        cfg.DeploymentID,
		RaftEventListener:   h,
		Expert:              expert,
		MaxSendQueueSize:    raftSendQueueBytes,
		MaxReceiveQueueSize: raftReceiveQueueBytes,
		MutualTLS:           cfg.MutualTLS,
		CAFile:              cfg.CAFile,
		CertFile:            cfg.CertFile,
		KeyFile:             cfg.KeyFile,
	}
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return nil, fmt.Errorf("shard: start node host: %w", err)
	}
	h.nh = nh
	switch {
	case man != nil:
		err = h.restart(man)
	case cfg.Join:
		h.man = &manifest{}
		err = h.man.save(cfg.DataDir)
	default:
		err = h.bootstrap()
	}
	if err != nil {
		h.stopShards()
		nh.Close()
		return nil, err
	}
	if cfg.Restore != nil {
		h.pendingRestore = map[uint64]struct{}{}
		for _, s := range *h.shards.Load() {
			h.pendingRestore[s.ID()] = struct{}{}
			s.SetRestoring(true)
		}
		h.wg.Add(1)
		go func() { defer h.wg.Done(); h.restoreLoop() }()
	}
	h.wg.Add(2)
	go func() { defer h.wg.Done(); h.placementLoop() }()
	go func() { defer h.wg.Done(); h.lessorLoop() }()
	return h, nil
}

// WALStats returns the node's Raft log store statistics (segment syncs and
// rotations).
func (h *Host) WALStats() *raftwal.Stats { return h.walStats }

// bootstrap starts the replicas of a new cluster: the meta group and every
// data shard on every initial member, replica id = node id.
func (h *Host) bootstrap() error {
	members := map[uint64]dragonboat.Target{}
	for id, addr := range h.cfg.Members {
		members[id] = addr
	}
	self := h.cfg.NodeID
	h.man = &manifest{Meta: &localReplica{Shard: placement.MetaShard, RID: self}}
	if err := h.startMeta(*h.man.Meta, members, false); err != nil {
		return err
	}
	for _, id := range h.bootIDs() {
		initial := map[uint64]dragonboat.Target{}
		for _, n := range h.bootReplicas(id) {
			initial[n] = members[n]
		}
		if _, mine := initial[self]; !mine {
			continue
		}
		r := localReplica{Shard: id, RID: self}
		if err := h.startData(r, initial, false); err != nil {
			return err
		}
		h.man.set(r)
	}
	return h.man.save(h.cfg.DataDir)
}

// restart starts the replicas the manifest lists, from their data.
func (h *Host) restart(man *manifest) error {
	h.man = man
	if man.Meta != nil {
		if err := h.startMeta(*man.Meta, nil, false); err != nil {
			return err
		}
	}
	for _, r := range append([]localReplica(nil), man.Shards...) {
		err := h.startData(r, nil, false)
		if err != nil && (r.NonVoting || r.New) {
			// Recorded as a learner but never created (a crash between the
			// record and the start): forget it; the move starts it again.
			h.log.Warn("dropping a learner that was never started", "shard", r.Shard, "err", err)
			man.drop(r.Shard)
			continue
		}
		if err != nil {
			return err
		}
	}
	return man.save(h.cfg.DataDir)
}

// bootReplicas are the nodes holding shard id's replicas in a new cluster.
func (h *Host) bootReplicas(id uint64) []uint64 {
	var all []uint64
	for n := range h.cfg.Members {
		all = append(all, n)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	rf := h.cfg.Replicas
	if rf <= 0 || rf > len(all) {
		return all
	}
	var out []uint64
	for j := 0; j < rf; j++ {
		out = append(out, all[(int(id-2)+j)%len(all)])
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// bootIDs are the data shards a new cluster is created with (a restored
// one: the backup's).
func (h *Host) bootIDs() []uint64 {
	if h.cfg.Restore != nil {
		return h.cfg.Restore.shardIDs()
	}
	ids := make([]uint64, h.cfg.DataShards)
	for i := range ids {
		ids[i] = uint64(i + 2)
	}
	return ids
}

func (h *Host) startMeta(r localReplica, members map[uint64]dragonboat.Target, join bool) error {
	cfg := h.raftConfig(placement.MetaShard, r.RID)
	cfg.IsNonVoting = r.NonVoting
	if err := h.nh.StartReplica(members, join, newMetaSM, cfg); err != nil {
		return fmt.Errorf("shard: start meta replica: %w", err)
	}
	h.metaStarted.Store(true)
	return nil
}

// startData starts a local replica of a data shard and its proposer and
// lessor. The caller records it in the manifest.
func (h *Host) startData(r localReplica, members map[uint64]dragonboat.Target, join bool) error {
	s := shard.New(shard.ReplicaConfig{Shard: r.Shard, NodeID: h.cfg.NodeID, Config: h.cfg.Shard, Clock: h.cfg.Clock,
		Log: h.log, Recorder: h.cfg.Recorder, NamespaceDepth: h.cfg.NamespaceDepth, Hint: h.hint, NodeHost: h.nh})
	smCfg := h.cfg.SM
	smCfg.ShardID = r.Shard
	create := func(shardID, replicaID uint64) sm.IConcurrentStateMachine {
		return s.NewStateMachine(smCfg, h.cfg.Recorder)
	}
	cfg := h.raftConfig(r.Shard, r.RID)
	cfg.IsNonVoting = r.NonVoting
	if err := h.nh.StartConcurrentReplica(members, join, create, cfg); err != nil {
		return fmt.Errorf("shard: start replica of shard %d: %w", r.Shard, err)
	}
	s.SetRID(r.RID)
	s.Start()
	h.putShard(s)
	return nil
}

func (h *Host) putShard(s *shard.Shard) {
	old := *h.shards.Load()
	next := make(map[uint64]*shard.Shard, len(old)+1)
	for id, x := range old {
		next[id] = x
	}
	if s.RID() == 0 {
		delete(next, s.ID())
	} else {
		next[s.ID()] = s
	}
	h.shards.Store(&next)
	h.replicasChangedNotify()
}

func (h *Host) stopShards() {
	for _, s := range *h.shards.Load() {
		s.Stop()
	}
}

// lessorLoop checks every shard's lease deadlines and revocation/lock-delay
// timers on one ticker: a ticker per shard woke each node 50 times a second
// per shard, leader or not.
func (h *Host) lessorLoop() {
	t := time.NewTicker(h.cfg.Shard.WithDefaults().LessorTick)
	defer t.Stop()
	for {
		select {
		case <-h.stopc:
			return
		case <-t.C:
			for _, s := range *h.shards.Load() {
				s.Tick()
			}
		}
	}
}

func (h *Host) raftConfig(shardID, rid uint64) config.Config {
	return config.Config{
		ShardID:             shardID,
		ReplicaID:           rid,
		ElectionRTT:         h.cfg.ElectionRTT,
		HeartbeatRTT:        h.cfg.HeartbeatRTT,
		CheckQuorum:         true,
		PreVote:             true,
		SnapshotEntries:     h.cfg.SnapshotEntries,
		CompactionOverhead:  h.cfg.SnapshotEntries / 4,
		OrderedConfigChange: true,
	}
}

// DefaultSnapshotEntries is how many entries a replica applies between
// snapshots. A data shard saves beside its applies (shard/durable.go),
// pausing only to encode its state; the value bounds the log kept when
// entries are small: up to 125,000 entries (with the compaction overhead
// of a quarter). Entries that carry many operations each reach the data
// shard's byte bound first (shard.Config.SnapshotLogBytes, logbound.go).
const DefaultSnapshotEntries = 100000

// LeaderUpdated implements raftio.IRaftEventListener (one host goroutine;
// must not block).
// Replica ids carry the node id in their low bits (placement.NodeOf);
// leaders are tracked by node.
func (h *Host) LeaderUpdated(info raftio.LeaderInfo) {
	leader := placement.NodeOf(info.LeaderID)
	s := (*h.shards.Load())[info.ShardID]
	if s != nil && s.RID() != info.ReplicaID {
		return // a replica of the shard this node stopped hosting
	}
	h.mu.Lock()
	h.leaders[info.ShardID] = leader
	h.leaderSince[info.ShardID] = time.Now()
	delete(h.remote, info.ShardID)
	delete(h.remoteSince, info.ShardID)
	h.mu.Unlock()
	if s != nil {
		s.OnLeader(leader, info.Term)
	}
}

// Close stops every replica and the NodeHost.
func (h *Host) Close() {
	close(h.stopc)
	h.wg.Wait()
	h.placeMu.Lock()
	h.stopShards()
	h.placeMu.Unlock()
	h.nh.Close()
}

// RangeMoved records that a range moved between shards (the placement
// code that moves ranges calls it once per completed move): it is logged
// at info and counted in warden_range_moves_total.
func (h *Host) RangeMoved(start, end string, from, to, move uint64) {
	h.rangeMoves.Add(1)
	h.log.Info("range moved", "start", fmt.Sprintf("%x", start), "end", fmt.Sprintf("%x", end), "from_shard", from, "to_shard", to, "move", move)
}

// RangeMoves is how many range moves this node has recorded.
func (h *Host) RangeMoves() uint64 { return h.rangeMoves.Load() }

// NodeID returns this node's id.
func (h *Host) NodeID() uint64 { return h.cfg.NodeID }

// NodeHost exposes the dragonboat host (tests, status).
func (h *Host) NodeHost() *dragonboat.NodeHost { return h.nh }

// Shard returns the local replica of a data shard.
func (h *Host) Shard(id uint64) (*shard.Shard, bool) {
	s, ok := (*h.shards.Load())[id]
	return s, ok
}

// ShardIDs returns the data shard ids hosted here, ascending.
func (h *Host) ShardIDs() []uint64 {
	m := *h.shards.Load()
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Leader returns the known leader node of a shard (0 = unknown): from the
// local replica when there is one, else as last heard from other nodes.
func (h *Host) Leader(shardID uint64) uint64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if l, ok := h.leaders[shardID]; ok {
		return l
	}
	return h.remote[shardID]
}

// Table returns the cached range table (nil until the meta group has one).
func (h *Host) Table() *placement.Table {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.table
}

func (h *Host) hint(shardID uint64) *wire.Hint {
	hint := &wire.Hint{Shard: shardID}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.table != nil {
		hint.Gen = h.table.Gen
		if n, ok := h.table.Node(h.leaders[shardID]); ok {
			hint.Leader = n.ClientAddr
		}
	}
	return hint
}

// RefreshTable reads the range table from the meta group.
func (h *Host) RefreshTable(ctx context.Context) (*placement.Table, error) {
	v, err := h.nh.SyncRead(ctx, placement.MetaShard, placement.TableQuery{})
	if err != nil {
		return nil, err
	}
	t, _ := v.(*placement.Table)
	if t != nil {
		h.mu.Lock()
		if h.table == nil || t.Gen >= h.table.Gen {
			h.table = t
		}
		h.mu.Unlock()
	}
	return t, nil
}

// placementLoop initialises the table on a fresh cluster, registers this
// node, and keeps each data shard's owned ranges equal to the table's.
func (h *Host) placementLoop() {
	registered := false
	for attempt := 0; ; attempt++ {
		wait := 500 * time.Millisecond
		if h.Table() == nil || !registered {
			wait = 50 * time.Millisecond
		}
		select {
		case <-h.stopc:
			return
		case <-time.After(wait):
		}
		if !h.metaStarted.Load() {
			continue // joining: JoinCluster starts the meta replica
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		t, err := h.RefreshTable(ctx)
		if err == nil && t == nil && h.isFirstMember() {
			err = h.metaPropose(ctx, h.initialTable())
		}
		if err == nil && t != nil && !registered {
			registered = h.register(ctx, t) == nil
		}
		if err == nil && t != nil {
			h.reconcileRanges(ctx, t)
			h.reconcileReplicas(ctx, t)
			h.shardDuties(ctx, t)
			h.balanceLeaders(t)
			h.driveShards(t)
			h.runPolicy(t)
			h.driveMoves(t)
			h.placeRanges(t)
		}
		cancel()
	}
}

func (h *Host) isFirstMember() bool {
	if h.cfg.Join {
		return false
	}
	for id := range h.cfg.Members {
		if id < h.cfg.NodeID {
			return false
		}
	}
	return true
}

func (h *Host) initialTable() []byte {
	if h.cfg.Restore != nil {
		cmd, _ := placement.InitCommand(h.restoreTable())
		return cmd
	}
	ids := h.bootIDs()
	t := &placement.Table{Gen: 1, NamespaceDepth: h.cfg.NamespaceDepth, Ranges: placement.EvenRanges(ids, 1)}
	for _, id := range ids {
		t.Shards = append(t.Shards, placement.ShardInfo{ID: id, Replicas: h.bootReplicas(id)})
	}
	cmd, _ := placement.InitCommand(t)
	return cmd
}

func (h *Host) register(ctx context.Context, t *placement.Table) error {
	self := h.self()
	h.placeMu.Lock()
	if m := h.man.Meta; m != nil && m.RID != self.ID {
		self.MetaReplica = m.RID
	}
	h.placeMu.Unlock()
	if n, ok := t.Node(self.ID); ok && n.RaftAddr == self.RaftAddr && n.ClientAddr == self.ClientAddr &&
		n.AdminAddr == self.AdminAddr && n.MetaReplica == self.MetaReplica {
		return nil
	}
	// Registering keeps the node's state (draining or not).
	_, err := h.metaProposeResult(ctx, placement.RegisterCommand(self))
	return err
}

func (h *Host) metaPropose(ctx context.Context, cmd []byte) error {
	_, err := h.nh.SyncPropose(ctx, h.nh.GetNoOPSession(placement.MetaShard), cmd)
	return err
}

// reconcileRanges proposes SetRanges to every data shard this node leads
// whose owned ranges are behind the table.
func (h *Host) reconcileRanges(ctx context.Context, t *placement.Table) {
	for _, s := range *h.shards.Load() {
		id := s.ID()
		if !s.IsLeader() || h.restoring(id) || t.Moving(id) {
			continue // restoring; or a move's driver sets the ranges of the shards it involves
		}
		v, err := h.nh.StaleRead(id, statemachine.StatsQuery{})
		if err != nil {
			continue
		}
		st, _ := v.(statemachine.Stats)
		if rangesEqual(st.Ranges, t.RangesOf(id)) {
			continue
		}
		done := make(chan *wire.Response, 1)
		s.Submit(&wire.Request{Op: wire.OpSetRanges, Gen: t.Gen, Ranges: t.RangesOf(id)}, func(r *wire.Response) { done <- r })
		select {
		case r := <-done:
			if r.Code != wire.OK {
				h.log.Warn("set ranges failed", "shard", id, "code", r.Code, "msg", r.Msg)
			}
		case <-ctx.Done():
		}
	}
}

func rangesEqual(a, b []wire.Range) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Start != b[i].Start || a[i].End != b[i].End || a[i].Shard != b[i].Shard || a[i].Gen != b[i].Gen {
			return false
		}
	}
	return true
}

// OwnsRanges reports whether a shard's state machine owns exactly the
// ranges the table gives it (read on the local replica).
func (h *Host) OwnsRanges(ctx context.Context, shardID uint64) (bool, error) {
	t := h.Table()
	if t == nil {
		return false, nil
	}
	v, err := h.nh.SyncRead(ctx, shardID, statemachine.StatsQuery{})
	if err != nil {
		return false, err
	}
	st, _ := v.(statemachine.Stats)
	return rangesEqual(st.Ranges, t.RangesOf(shardID)), nil
}

// TransferLeader asks the shard's Raft group to hand its leadership to the
// replica on node to (asynchronous and best effort, as dragonboat's
// RequestLeaderTransfer; tests and operators use it).
func (h *Host) TransferLeader(shardID, to uint64) error {
	return h.nh.RequestLeaderTransfer(shardID, to)
}
