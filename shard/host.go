package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/config"
	dblogger "github.com/lni/dragonboat/v4/logger"
	"github.com/lni/dragonboat/v4/raftio"
	sm "github.com/lni/dragonboat/v4/statemachine"

	"github.com/wardenlock/warden/placement"
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
	SnapshotEntries uint64        // entries between snapshots (default 20000)
	DeploymentID    uint64
	NoLeaderBalance bool // leave shard leaders wherever elections put them
	// Engine shape, fixed when a data dir is created (dragonboat pins it).
	LogDBShards  uint64 // write-ahead logs per node (default 1)
	StepWorkers  uint64 // Raft step and commit workers (default 2)
	ApplyWorkers uint64 // state machine apply workers (default 4)

	SM    statemachine.Config
	Shard Config
	Clock Clock
	Log   *slog.Logger

	// MutualTLS turns on dragonboat's mutual TLS for Raft traffic: every
	// peer must present a certificate signed by CAFile.
	MutualTLS                 bool
	CAFile, CertFile, KeyFile string
}

func (c *HostConfig) fill() error {
	if c.NodeID == 0 {
		return errors.New("shard: node id must be non-zero")
	}
	if c.DataDir == "" || c.RaftAddr == "" {
		return errors.New("shard: data dir and raft address are required")
	}
	if _, ok := c.Members[c.NodeID]; !ok {
		return fmt.Errorf("shard: node %d is not in the member list", c.NodeID)
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
	if c.LogDBShards == 0 {
		c.LogDBShards = 1
	}
	if c.StepWorkers == 0 {
		c.StepWorkers = 2
	}
	if c.ApplyWorkers == 0 {
		c.ApplyWorkers = 4
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 20000
	}
	if c.DeploymentID == 0 {
		c.DeploymentID = 7070
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.SM.MaxTTL == 0 {
		id := c.SM.ShardID
		c.SM = statemachine.DefaultConfig()
		c.SM.ShardID = id
	}
	c.SM.SplitDepth = c.NamespaceDepth
	return c.SM.Validate()
}

// Host is one node's NodeHost with its replicas of the meta group and of
// every data shard.
type Host struct {
	cfg    HostConfig
	nh     *dragonboat.NodeHost
	log    *slog.Logger
	shards map[uint64]*Shard // fixed after NewHost
	ids    []uint64

	mu          sync.RWMutex
	table       *placement.Table
	leaders     map[uint64]uint64    // shard → leader replica id
	leaderSince map[uint64]time.Time // shard → when its leadership last changed

	lastBalance time.Time // placement loop only

	stopc chan struct{}
	wg    sync.WaitGroup
}

var quietOnce sync.Once

// NewHost starts the NodeHost and every replica. It returns once they are
// started; leaders are elected in the background.
func NewHost(cfg HostConfig) (*Host, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	quietOnce.Do(func() {
		for _, p := range []string{"raft", "rsm", "transport", "dragonboat", "logdb", "raftpb", "config", "grpc", "settings", "tan"} {
			dblogger.GetLogger(p).SetLevel(dblogger.ERROR)
		}
	})
	h := &Host{cfg: cfg, log: cfg.Log, shards: map[uint64]*Shard{}, leaders: map[uint64]uint64{},
		leaderSince: map[uint64]time.Time{},
		stopc:       make(chan struct{})}
	for i := 0; i < cfg.DataShards; i++ {
		id := uint64(i + 2)
		h.shards[id] = newShard(h, id)
		h.ids = append(h.ids, id)
	}
	expert := config.GetDefaultExpertConfig()
	expert.LogDB = config.GetTinyMemLogDBConfig()
	// One write-ahead log per node, and few step workers: each worker saves
	// the Raft updates of all its shards in one batch and one fsync, so a
	// node group-commits across shards. With dragonboat's defaults (16
	// LogDB shards, 16 step workers) every shard syncs its own small
	// batches and throughput falls as shards are added.
	expert.LogDB.Shards = cfg.LogDBShards
	expert.Engine.ExecShards = cfg.StepWorkers
	expert.Engine.CommitShards = cfg.StepWorkers
	expert.Engine.ApplyShards = cfg.ApplyWorkers
	// One write per Raft message batch and buffered reads (transport.go).
	expert.TransportFactory = TransportFactory{}
	nhc := config.NodeHostConfig{
		NodeHostDir:       filepath.Join(cfg.DataDir, "raft"),
		RTTMillisecond:    uint64(cfg.RTT / time.Millisecond),
		RaftAddress:       cfg.RaftAddr,
		ListenAddress:     cfg.RaftListen,
		DeploymentID:      cfg.DeploymentID,
		RaftEventListener: h,
		Expert:            expert,
		MutualTLS:         cfg.MutualTLS,
		CAFile:            cfg.CAFile,
		CertFile:          cfg.CertFile,
		KeyFile:           cfg.KeyFile,
	}
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return nil, fmt.Errorf("shard: start node host: %w", err)
	}
	h.nh = nh
	members := map[uint64]dragonboat.Target{}
	for id, addr := range cfg.Members {
		members[id] = addr
	}
	if err := nh.StartReplica(members, false, placement.NewMeta, h.raftConfig(placement.MetaShard)); err != nil {
		nh.Close()
		return nil, fmt.Errorf("shard: start meta replica: %w", err)
	}
	for _, id := range h.ids {
		s := h.shards[id]
		smCfg := cfg.SM
		smCfg.ShardID = id
		create := func(shardID, replicaID uint64) sm.IStateMachine {
			m := statemachine.New(smCfg)
			m.SetObserver(s)
			s.sm.Store(m)
			return m
		}
		if err := nh.StartReplica(members, false, create, h.raftConfig(id)); err != nil {
			nh.Close()
			return nil, fmt.Errorf("shard: start replica of shard %d: %w", id, err)
		}
		s.start(nh)
	}
	h.wg.Add(2)
	go func() { defer h.wg.Done(); h.placementLoop() }()
	go func() { defer h.wg.Done(); h.lessorLoop() }()
	return h, nil
}

// lessorLoop checks every shard's lease deadlines on one ticker: a ticker
// per shard woke each node 50 times a second per shard, leader or not.
func (h *Host) lessorLoop() {
	t := time.NewTicker(h.cfg.Shard.withDefaults().LessorTick)
	defer t.Stop()
	for {
		select {
		case <-h.stopc:
			return
		case <-t.C:
			for _, id := range h.ids {
				h.shards[id].lessor.tick()
			}
		}
	}
}

func (h *Host) raftConfig(shardID uint64) config.Config {
	return config.Config{
		ShardID:             shardID,
		ReplicaID:           h.cfg.NodeID,
		ElectionRTT:         h.cfg.ElectionRTT,
		HeartbeatRTT:        h.cfg.HeartbeatRTT,
		CheckQuorum:         true,
		PreVote:             true,
		SnapshotEntries:     h.cfg.SnapshotEntries,
		CompactionOverhead:  h.cfg.SnapshotEntries / 4,
		OrderedConfigChange: true,
	}
}

// LeaderUpdated implements raftio.IRaftEventListener (one host goroutine;
// must not block).
func (h *Host) LeaderUpdated(info raftio.LeaderInfo) {
	h.mu.Lock()
	h.leaders[info.ShardID] = info.LeaderID
	h.leaderSince[info.ShardID] = time.Now()
	h.mu.Unlock()
	if s := h.shards[info.ShardID]; s != nil {
		s.onLeader(info.LeaderID, info.Term)
	}
}

// Close stops every replica and the NodeHost.
func (h *Host) Close() {
	close(h.stopc)
	h.wg.Wait()
	for _, id := range h.ids {
		h.shards[id].stop()
	}
	h.nh.Close()
}

// NodeID returns this node's id.
func (h *Host) NodeID() uint64 { return h.cfg.NodeID }

// NodeHost exposes the dragonboat host (tests, status).
func (h *Host) NodeHost() *dragonboat.NodeHost { return h.nh }

// Shard returns the local replica of a data shard.
func (h *Host) Shard(id uint64) (*Shard, bool) {
	s, ok := h.shards[id]
	return s, ok
}

// ShardIDs returns the data shard ids hosted here, ascending.
func (h *Host) ShardIDs() []uint64 { return h.ids }

// Leader returns the known leader of a shard (0 = unknown).
func (h *Host) Leader(shardID uint64) uint64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.leaders[shardID]
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
			h.balanceLeaders(t)
		}
		cancel()
	}
}

func (h *Host) isFirstMember() bool {
	for id := range h.cfg.Members {
		if id < h.cfg.NodeID {
			return false
		}
	}
	return true
}

func (h *Host) initialTable() []byte {
	var replicas []uint64
	for id := range h.cfg.Members {
		replicas = append(replicas, id)
	}
	sort.Slice(replicas, func(i, j int) bool { return replicas[i] < replicas[j] })
	t := &placement.Table{Gen: 1, NamespaceDepth: h.cfg.NamespaceDepth, Ranges: placement.EvenRanges(h.ids, 1)}
	for _, id := range h.ids {
		t.Shards = append(t.Shards, placement.ShardInfo{ID: id, Replicas: replicas})
	}
	cmd, _ := placement.InitCommand(t)
	return cmd
}

func (h *Host) register(ctx context.Context, t *placement.Table) error {
	self := placement.Node{ID: h.cfg.NodeID, RaftAddr: h.cfg.RaftAddr, ClientAddr: h.cfg.ClientAddr, AdminAddr: h.cfg.AdminAddr}
	if n, ok := t.Node(self.ID); ok && n == self {
		return nil
	}
	cmd, _ := placement.NodeCommand(self)
	return h.metaPropose(ctx, cmd)
}

func (h *Host) metaPropose(ctx context.Context, cmd []byte) error {
	_, err := h.nh.SyncPropose(ctx, h.nh.GetNoOPSession(placement.MetaShard), cmd)
	return err
}

// reconcileRanges proposes SetRanges to every data shard this node leads
// whose owned ranges are behind the table.
func (h *Host) reconcileRanges(ctx context.Context, t *placement.Table) {
	for _, id := range h.ids {
		s := h.shards[id]
		if !s.IsLeader() {
			continue
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
		s.Submit(&wire.Request{Op: wire.OpSetRanges, Ranges: t.RangesOf(id)}, func(r *wire.Response) { done <- r })
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
