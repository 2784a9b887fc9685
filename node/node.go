package node

import (
	"cmp"
	"crypto/ed25519"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/wardenlock/warden/admin"
	"github.com/wardenlock/warden/audit"
	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/control"
	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/internal/diskfs"
	"github.com/wardenlock/warden/lease"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/shard"
	"github.com/wardenlock/warden/statemachine"
)

// Member names one initial cluster member.
type Member struct {
	ID       uint64
	RaftAddr string
}

// Config configures one node. Zero values take the defaults noted.
type Config struct {
	ID         uint64
	DataDir    string
	ClientAddr string // listen address for clients (default 127.0.0.1:7070)
	RaftAddr   string // Raft address peers dial (default 127.0.0.1:7170)
	RaftListen string // where Raft listens, when a proxy sits in front ("" = RaftAddr)
	AdminAddr  string // admin HTTP address ("" = off)
	Members    []Member
	// Join lists client addresses of running nodes: this node joins their
	// cluster (registers, becomes a non-voting meta member, then receives
	// replicas by moves) instead of bootstrapping one. Members is ignored.
	Join []string

	DataShards     int           // default 8
	Replicas       int           // replicas per data shard at creation (0 = on every member)
	NamespaceDepth int           // default 2
	RTT            time.Duration // default 10 ms
	ElectionRTT    uint64        // default 15 ticks
	// SnapshotEntries is how many entries each replica applies between
	// snapshots (0: control.DefaultSnapshotEntries).
	SnapshotEntries uint64
	HeartbeatRTT    uint64 // default 3 ticks

	// Security (security.go). TLS nil = plaintext on the client, Raft and
	// admin ports; otherwise TLS 1.3 on all three, mutual TLS for Raft.
	TLS        *auth.TLSFiles
	AdminTLS   *tls.Config   // admin HTTP port; defaults to the client port's config when TLS is set
	Auth       *auth.Policy  // nil = no authentication (everyone may do everything)
	PeerSecret string        // authenticates node-to-node forwarding without mTLS (needed for auth over plaintext)
	liveTLS    *auth.LiveTLS // TLS's material, read again by Reload (set by security)

	// AdminPlaintextAnywhere lets the admin port serve without TLS on a
	// non-loopback address (refused otherwise: admin.CheckExposure).
	AdminPlaintextAnywhere bool
	AdminLimits            admin.Limits // the admin port's connection limits and timeouts
	// ClientAdvertise is the client address other nodes and clients dial,
	// when it differs from the address ClientAddr binds: a DNS name that
	// the node certificate covers, where the bound IP changes (Kubernetes).
	// "" = the bound address.
	ClientAdvertise string

	// SigningKey is the cluster's Ed25519 key for signed fencing tokens
	// (nil: grants are never signed).
	SigningKey ed25519.PrivateKey

	// LogFS is the file system the Raft log store works through (nil: the
	// disk); tests pass one that can lose power.
	LogFS diskfs.FS

	// Audit configures the node's audit trail and watch history store (in
	// DataDir/audit unless Audit.Dir is set); NoAudit turns it off.
	Audit   audit.Options
	NoAudit bool
	// Ranges tunes automatic range splits and rebalancing (off by default);
	// MoveHook is a test hook on every range-move step (control.HostConfig).
	Ranges control.RangePolicy
	// NoLeaderBalance leaves shard leaders wherever elections and
	// operators put them (control/balance.go; Host.SetLeaderBalance turns
	// it on and off at run time).
	NoLeaderBalance bool
	MoveHook        func(move uint64, step placement.RangeStep, stop <-chan struct{})
	// ShardHook hears each shard lifecycle step the node recorded, and
	// CreateTimeout bounds a shard creation (shard.HostConfig).
	ShardHook     func(shard uint64, step string, stop <-chan struct{})
	CreateTimeout time.Duration
	// ShardPolicy runs the automatic shard count on the meta leader
	// (control/policy.go; off by default).
	ShardPolicy control.ShardPolicy
	// CPU reads this process's CPU use (internal/cpuload): the node reports
	// it in its status, and the shard policy compares nodes by it. nil:
	// not measured (several nodes share a test process).
	CPU func() cpuload.Reading

	SM     statemachine.Config // zero = statemachine.DefaultConfig()
	Shard  shard.Config
	Router router.Config
	Clock  lease.Clock
	Log    *slog.Logger
}

// Node is a running node.
type Node struct {
	cfg    Config
	Host   *control.Host
	Router *router.Server
	Admin  *admin.Server // nil when AdminAddr is ""
	Audit  *audit.Store  // nil when NoAudit
	ln     net.Listener
	done   chan error

	joinDone chan error    // nil unless the node joins a running cluster
	closing  chan struct{} // closed by Close
}

// Start starts the host and the router and returns once the client port
// is listening. Leaders are elected in the background.
func Start(cfg Config) (*Node, error) {
	if cfg.ClientAddr == "" {
		cfg.ClientAddr = "127.0.0.1:7070"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cfg.Log = cfg.Log.With("node", cfg.ID)
	members := map[uint64]string{}
	for _, m := range cfg.Members {
		members[m.ID] = m.RaftAddr
	}
	if len(members) == 0 || len(cfg.Join) > 0 {
		members = map[uint64]string{cfg.ID: cfg.RaftAddr}
	}
	if cfg.RaftAddr == "" {
		cfg.RaftAddr = members[cfg.ID]
	}
	sec, serverTLS, err := cfg.security()
	if err != nil {
		return nil, err
	}
	plan, err := restorePlan(&cfg)
	if err != nil {
		return nil, err
	}
	var store *audit.Store
	var recorder shard.Recorder
	if !cfg.NoAudit && (cfg.DataDir != "" || cfg.Audit.Dir != "") {
		ao := cfg.Audit
		if ao.Dir == "" {
			ao.Dir = filepath.Join(cfg.DataDir, "audit")
		}
		ao.Log = cfg.Log
		if store, err = audit.Open(ao); err != nil {
			return nil, err
		}
		recorder = store
	}
	closeStore := func() {
		if store != nil {
			store.Close()
		}
	}
	ln, err := router.Listen(cfg.ClientAddr)
	if err != nil {
		closeStore()
		return nil, fmt.Errorf("node: listen for clients: %w", err)
	}
	if serverTLS != nil {
		ln = tls.NewListener(ln, serverTLS)
	}
	var adminLn net.Listener
	if cfg.AdminAddr != "" {
		if err = admin.CheckExposure(cfg.AdminAddr, cfg.AdminTLS != nil, cfg.AdminPlaintextAnywhere); err == nil {
			adminLn, err = admin.Listen(cfg.AdminAddr)
		}
		if err != nil {
			ln.Close()
			closeStore()
			return nil, err
		}
		cfg.AdminAddr = adminLn.Addr().String()
	}
	host, err := control.NewHost(control.HostConfig{
		NodeID: cfg.ID, RaftAddr: cfg.RaftAddr, RaftListen: cfg.RaftListen, ClientAddr: cmp.Or(cfg.ClientAdvertise, ln.Addr().String()), AdminAddr: cfg.AdminAddr,
		DataDir: cfg.DataDir, Members: members, DataShards: cfg.DataShards, NamespaceDepth: cfg.NamespaceDepth,
		RTT: cfg.RTT, ElectionRTT: cfg.ElectionRTT, HeartbeatRTT: cfg.HeartbeatRTT, SnapshotEntries: cfg.SnapshotEntries,
		SM: cfg.SM, Shard: cfg.Shard, Clock: cfg.Clock, Log: cfg.Log, Restore: plan, Recorder: recorder,
		Ranges: cfg.Ranges, MoveHook: cfg.MoveHook, NoLeaderBalance: cfg.NoLeaderBalance,
		ShardHook: cfg.ShardHook, CreateTimeout: cfg.CreateTimeout, Policy: cfg.ShardPolicy,
		MutualTLS: cfg.TLS != nil, CAFile: tlsFile(cfg.TLS, "ca"), CertFile: tlsFile(cfg.TLS, "cert"), KeyFile: tlsFile(cfg.TLS, "key"),
		Join: len(cfg.Join) > 0, Replicas: cfg.Replicas, LogFS: cfg.LogFS,
	})
	if err != nil {
		ln.Close()
		if adminLn != nil {
			adminLn.Close()
		}
		closeStore()
		return nil, err
	}
	rc := cfg.Router
	rc.Host = routerHost{host, cfg.CPU}
	rc.SigningKey = cfg.SigningKey
	rc.Log = cfg.Log
	rc.Security = sec
	if rc.Paths.MaxDepth == 0 {
		rc.Paths = cfg.SM.Paths
	}
	smc := cfg.SM.WithDefaults()
	rc.MinTTL, rc.MaxTTL = time.Duration(smc.MinTTL)*time.Millisecond, time.Duration(smc.MaxTTL)*time.Millisecond
	n := &Node{cfg: cfg, Host: host, Router: router.New(rc), Audit: store, ln: ln, done: make(chan error, 1), closing: make(chan struct{})}
	host.SetNodeCPU(n.nodeCPU)
	go func() { n.done <- n.Router.Serve(ln) }()
	if len(cfg.Join) > 0 {
		n.joinDone = make(chan error, 1)
		go func() { n.joinDone <- n.join() }()
	}
	if adminLn != nil {
		n.Admin, err = admin.Start(adminLn, admin.Config{Host: host, Router: n.Router, Audit: store, Metrics: metricsConfig(host, n.Router, store), DataDir: cfg.DataDir, Log: cfg.Log,
			TLS: cfg.AdminTLS, PlaintextAnywhere: cfg.AdminPlaintextAnywhere, Limits: cfg.AdminLimits})
		if err != nil {
			adminLn.Close()
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// nodeCPU is the CPU use of every node this node's router heard from in
// the last cpuload.Window (the shard policy's reading).
func (n *Node) nodeCPU() map[uint64]cpuload.Reading {
	out := map[uint64]cpuload.Reading{}
	for id, l := range n.Router.NodeLiveness() {
		if l.State == router.NodeUp && l.CPU != nil && time.Since(l.LastHeard) < cpuload.Window {
			out[id] = *l.CPU
		}
	}
	return out
}

// ClientAddr is the address clients connect to.
func (n *Node) ClientAddr() string { return n.ln.Addr().String() }

// Close stops the router, then the replicas.
func (n *Node) Close() {
	close(n.closing)
	if n.Admin != nil {
		n.Admin.Close()
	}
	n.Router.Close()
	<-n.done
	n.Host.Close()
	if n.Audit != nil {
		n.Audit.Close()
	}
}

// LocalCluster describes n nodes on 127.0.0.1 with consecutive ports:
// clients on basePort+i, Raft on basePort+100+i, admin on basePort+200+i.
func LocalCluster(n int, dataDir string, basePort int) []Config {
	var members []Member
	for i := 1; i <= n; i++ {
		members = append(members, Member{ID: uint64(i), RaftAddr: "127.0.0.1:" + strconv.Itoa(basePort+100+i-1)})
	}
	sort.Slice(members, func(i, j int) bool { return members[i].ID < members[j].ID })
	cfgs := make([]Config, n)
	for i := range cfgs {
		cfgs[i] = Config{
			ID:         uint64(i + 1),
			DataDir:    filepath.Join(dataDir, "node"+strconv.Itoa(i+1)),
			ClientAddr: "127.0.0.1:" + strconv.Itoa(basePort+i),
			AdminAddr:  "127.0.0.1:" + strconv.Itoa(basePort+200+i),
			Members:    members,
		}
	}
	return cfgs
}
