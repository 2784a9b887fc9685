package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/admin"
	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/router"
)

// serveFlags are the values of `warden serve`'s flags (a config file sets
// them too: config.go).
type serveFlags struct {
	ID              uint64
	DataDir         string
	Listen          string
	Raft            string
	RaftListen      string
	SigningKey      string
	Admin           string
	Members         []string // "id=raft-address"
	Join            []string // client addresses of running nodes
	Shards          int
	Replicas        int
	NamespaceDepth  int
	RTTMillis       int
	LogLevel        string
	AuditRetention  string // e.g. 168h
	AuditMaxBytes   int64
	NoAudit         bool
	NoLeaderBalance bool
	LockDelay       string // default lock-delay (a duration; the same on every node)
	MemoryLimit     string // soft memory limit: auto, off or a size (memlimit.go)
	Procs           string // GOMAXPROCS: auto, runtime or a count (procs.go)
	MaxBatchOps     int
	MaxInflight     int
	SnapshotEntries uint64
	SnapshotBytes   string // --snapshot-log-bytes: a size, or off
	QueueHold       string
	ShardPolicy     shardPolicyFlags // serve_shards.go

	Advertise string // client address others dial ("": the bound --listen address)

	// The admin port's guard (admin.Limits, admin.CheckExposure).
	InsecurePlaintextAdmin bool
	AdminMaxConnsPerAddr   int
	AdminMaxConns          int
	AdminHeaderTimeout     string
	AdminIdleTimeout       string
}

func serveCmd() *cobra.Command { return newServeCmd(serveNode) }

// newServeCmd is `warden serve`, which builds a node's config from the
// flags (and the config file, which sets flags) and hands it to run
// (serveNode; the tests of the ops/ files capture it instead).
func newServeCmd(run func(cfg node.Config, fc serveFlags, sec *serveSecurity) error) *cobra.Command {
	var (
		fc  serveFlags
		sec serveSecurity
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run one node of a cluster",
		Example: `  warden serve --id 1 --data-dir /var/lib/warden \
    --listen 10.0.0.1:7070 --raft 10.0.0.1:7170 \
    --members 1=10.0.0.1:7170,2=10.0.0.2:7170,3=10.0.0.3:7170

  # a fourth machine joins the running cluster
  warden serve --id 4 --data-dir /var/lib/warden \
    --listen 10.0.0.4:7070 --raft 10.0.0.4:7170 --join 10.0.0.1:7070,10.0.0.2:7070`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := nodeConfig(fc)
			if err == nil {
				err = fc.ShardPolicy.apply(&cfg, cmd.Flags().Changed("shards"))
			}
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			if err := sec.apply(&cfg); err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			return run(cfg, fc, &sec)
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&fc.ID, "id", 1, "node id (unique, non-zero)")
	f.StringVar(&fc.DataDir, "data-dir", "./data/node1", "where Raft logs and snapshots live")
	f.StringVar(&fc.Listen, "listen", "127.0.0.1:7070", "client address")
	f.StringVar(&fc.Raft, "raft", "127.0.0.1:7170", "Raft address other nodes dial")
	f.StringVar(&fc.Advertise, "advertise", "", "client address other nodes and clients dial, when it is not the address --listen binds (a DNS name the node certificate covers)")
	f.StringVar(&fc.SigningKey, "signing-key", "", "cluster Ed25519 key that signs fencing tokens on request (warden signing-key)")
	f.StringVar(&fc.RaftListen, "raft-listen", "", "address Raft listens on when it differs from --raft (a proxy in front)")
	f.StringVar(&fc.Admin, "admin", "", "admin HTTP address (empty: off); without TLS it must be a loopback address")
	f.BoolVar(&fc.InsecurePlaintextAdmin, "insecure-plaintext-admin", false, "serve the admin port without TLS on a non-loopback address: whoever reaches it reads every key, lock and session, in clear (development networks only)")
	f.IntVar(&fc.AdminMaxConnsPerAddr, "admin-max-conns-per-addr", admin.DefaultLimits.MaxConnsPerAddr, "open admin connections per client IP; more are reset at accept (-1: unlimited)")
	f.IntVar(&fc.AdminMaxConns, "admin-max-conns", admin.DefaultLimits.MaxConns, "open admin connections, all addresses (-1: unlimited)")
	f.StringVar(&fc.AdminHeaderTimeout, "admin-header-timeout", admin.DefaultLimits.HeaderTimeout.String(), "an admin connection must finish its TLS handshake and send a whole request within it")
	f.StringVar(&fc.AdminIdleTimeout, "admin-idle-timeout", admin.DefaultLimits.IdleTimeout.String(), "a kept-alive admin connection without a next request is closed after it")
	f.StringSliceVar(&fc.Members, "members", nil, "initial members as id=raft-address,... (default: this node alone)")
	f.StringSliceVar(&fc.Join, "join", nil, "join a running cluster through these node client addresses (host:port,...) instead of creating one")
	sec.register(f)
	f.IntVar(&fc.Shards, "shards", 8, "number of data shards a new cluster starts with (more are added and retired at runtime: warden shards add, retire)")
	fc.ShardPolicy.register(f)
	f.IntVar(&fc.Replicas, "replicas", 0, "replicas per data shard at cluster creation (0: on every initial member)")
	f.IntVar(&fc.NamespaceDepth, "namespace-depth", 2, "path depth ranges are cut at (fixed at cluster creation)")
	f.IntVar(&fc.RTTMillis, "rtt-ms", 10, "Raft tick in milliseconds (election after 15 ticks)")
	f.StringVar(&fc.LogLevel, "log-level", "warn", "debug, info, warn or error (info adds leader changes, range moves, lease expiries)")
	f.StringVar(&fc.AuditRetention, "audit-retention", "168h", "how long the audit trail and watch history are kept")
	f.Int64Var(&fc.AuditMaxBytes, "audit-max-bytes", 1<<30, "size the audit store is trimmed to, oldest records first")
	f.BoolVar(&fc.NoAudit, "no-audit", false, "keep no audit trail (watches then resume only from the in-memory ring)")
	f.BoolVar(&fc.NoLeaderBalance, "no-leader-balance", false, "leave shard leaders where elections and warden shards transfer put them (every node: the meta leader balances)")
	f.IntVar(&fc.MaxBatchOps, "max-batch-ops", 0, "client operations per Raft entry, per shard leader (0: 2048)")
	f.IntVar(&fc.MaxInflight, "max-inflight-entries", 0, "Raft entries a shard leader has proposed but not applied (0: 32); 1 with a small --max-batch-ops bounds a leader by its commit round trip")
	f.Uint64Var(&fc.SnapshotEntries, "snapshot-entries", 0, "Raft entries each replica applies between snapshots (0: 100000); a replica pauses its applies while it encodes one in memory, and keeps and replays up to 1.25× this many entries")
	f.StringVar(&fc.SnapshotBytes, "snapshot-log-bytes", "256MiB", "a replica whose Raft log grew by this much since its last snapshot takes one, whatever its entry count, and keeps a quarter of it (a size such as 64MiB or 1GiB, or off: by --snapshot-entries alone)")
	f.StringVar(&fc.QueueHold, "queue-hold", "2ms", "longest a waiting acquire on a lock that already has waiters is held back to join the next operation's Raft entry (typically the holder's release), one entry per hand-off instead of two (0: never held)")
	f.StringVar(&fc.LockDelay, "lock-delay", "0s", "default lock-delay after a lock's lease expires or it is revoked (same on every node; 0: off)")
	f.StringVar(&fc.MemoryLimit, "memory-limit", "auto", "soft limit on the node's memory, which makes the Go collector run sooner as it nears it: a size (512MiB, 2GiB), off, or auto (half the machine's or container's memory; GOMEMLIMIT, if set, wins)")
	f.StringVar(&fc.Procs, "procs", "auto", "Go Ps (GOMAXPROCS) the node runs: auto (one when its cgroup allows it at most one core, where Go's own default is two; else Go's default), runtime (always Go's default) or a count; GOMAXPROCS, if set, wins")
	withObservability(cmd)
	withConfigFile(cmd)
	return cmd
}

// serveNode runs the node of `warden serve` until SIGINT or SIGTERM.
func serveNode(cfg node.Config, fc serveFlags, sec *serveSecurity) error {
	limit, err := applyMemoryLimit(fc.MemoryLimit)
	if err != nil {
		return &exitError{code: exitFailure, err: err}
	}
	cfg.Log.Info("soft memory limit", "bytes", limit)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := startProcs(ctx, fc.Procs, cfg.Log); err != nil {
		return &exitError{code: exitFailure, err: err}
	}
	// One node per process: the process's CPU is the node's.
	meter := cpuload.Start()
	defer meter.Stop()
	cfg.CPU = meter.Read
	return runNodes([]node.Config{cfg}, cfg.Log, sec.reloadNodes)
}

func pickS(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// minSnapshotLogBytes is the smallest --snapshot-log-bytes: below it a
// replica would snapshot every few entries.
const minSnapshotLogBytes = 64 << 10

// snapshotLogBytes reads --snapshot-log-bytes: a size of at least
// minSnapshotLogBytes, or off (-1, the shard's "entries only"; "" is the
// shard's default).
func snapshotLogBytes(v string) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "":
		return 0, nil
	case "off":
		return -1, nil
	}
	n, err := parseSize(v)
	if err != nil || n < minSnapshotLogBytes {
		return 0, fmt.Errorf("snapshot-log-bytes %q: want a size of at least 64KiB (such as 256MiB), or off", v)
	}
	return n, nil
}

func nodeConfig(fc serveFlags) (node.Config, error) {
	cfg := node.Config{
		ID: fc.ID, DataDir: fc.DataDir, ClientAddr: fc.Listen, RaftAddr: fc.Raft, RaftListen: fc.RaftListen, AdminAddr: fc.Admin,
		DataShards: fc.Shards, Replicas: fc.Replicas, NamespaceDepth: fc.NamespaceDepth, RTT: time.Duration(fc.RTTMillis) * time.Millisecond,
		Log: newLogger(fc.LogLevel), Clock: testClock(),
	}
	cfg.NoAudit, cfg.Audit.MaxBytes = fc.NoAudit, fc.AuditMaxBytes
	cfg.NoLeaderBalance = fc.NoLeaderBalance
	cfg.SnapshotEntries = fc.SnapshotEntries
	logBytes, err := snapshotLogBytes(fc.SnapshotBytes)
	if err != nil {
		return cfg, err
	}
	cfg.Shard.SnapshotLogBytes = logBytes
	if fc.MaxBatchOps < 0 || fc.MaxInflight < 0 {
		return cfg, fmt.Errorf("max-batch-ops %d, max-inflight-entries %d: want 0 (the default) or more", fc.MaxBatchOps, fc.MaxInflight)
	}
	cfg.Shard.MaxBatchOps, cfg.Shard.MaxInflight = fc.MaxBatchOps, fc.MaxInflight
	if fc.QueueHold != "" {
		d, err := time.ParseDuration(fc.QueueHold)
		if err != nil || d < 0 {
			return cfg, fmt.Errorf("queue-hold %q: want a duration such as 2ms, or 0 to hold nothing", fc.QueueHold)
		}
		cfg.Shard.QueueHold = d
		if d == 0 {
			cfg.Shard.QueueHold = -1 // the shard's "off"; its 0 means the default
		}
	}
	if fc.Advertise != "" {
		if _, _, err := net.SplitHostPort(fc.Advertise); err != nil {
			return cfg, fmt.Errorf("advertise %q: %w", fc.Advertise, err)
		}
		cfg.ClientAdvertise = fc.Advertise
	}
	if err := adminLimits(fc, &cfg); err != nil {
		return cfg, err
	}
	if fc.AuditRetention != "" {
		d, err := time.ParseDuration(fc.AuditRetention)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("audit-retention %q: want a positive duration such as 168h", fc.AuditRetention)
		}
		cfg.Audit.MaxAge = d
	}
	if fc.LockDelay != "" {
		d, err := time.ParseDuration(fc.LockDelay)
		if err != nil || d < 0 {
			return cfg, fmt.Errorf("--lock-delay %q: want a duration such as 15s", fc.LockDelay)
		}
		cfg.SM.LockDelay = d.Milliseconds()
	}
	if fc.SigningKey != "" {
		key, err := loadSigningKey(fc.SigningKey)
		if err != nil {
			return cfg, err
		}
		cfg.SigningKey = key
	}
	for _, m := range fc.Members {
		id, addr, ok := strings.Cut(strings.TrimSpace(m), "=")
		n, err := strconv.ParseUint(id, 10, 64)
		if !ok || err != nil || n == 0 {
			return cfg, fmt.Errorf("member %q: want id=host:port", m)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return cfg, fmt.Errorf("member %q: %w", m, err)
		}
		cfg.Members = append(cfg.Members, node.Member{ID: n, RaftAddr: addr})
	}
	if len(cfg.Members) == 0 {
		cfg.Members = []node.Member{{ID: fc.ID, RaftAddr: fc.Raft}}
	}
	for _, a := range fc.Join {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Join = append(cfg.Join, a)
		}
	}
	return cfg, nil
}

// adminLimits fills the admin port's guard from the flags.
func adminLimits(fc serveFlags, cfg *node.Config) error {
	cfg.AdminPlaintextAnywhere = fc.InsecurePlaintextAdmin
	cfg.AdminLimits.MaxConnsPerAddr, cfg.AdminLimits.MaxConns = fc.AdminMaxConnsPerAddr, fc.AdminMaxConns
	for _, d := range []struct {
		flag, v string
		to      *time.Duration
	}{
		{"admin-header-timeout", fc.AdminHeaderTimeout, &cfg.AdminLimits.HeaderTimeout},
		{"admin-idle-timeout", fc.AdminIdleTimeout, &cfg.AdminLimits.IdleTimeout},
	} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			return fmt.Errorf("%s %q: want a positive duration such as 5s", d.flag, d.v)
		}
		*d.to = v
	}
	return nil
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// runNodes starts the nodes and blocks until SIGINT/SIGTERM. On SIGHUP it
// calls reload (when not nil).
func runNodes(cfgs []node.Config, log *slog.Logger, reload func([]*node.Node, *slog.Logger)) error {
	// Caught from the start: SIGHUP's default action would end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var nodes []*node.Node
	defer func() {
		for i := len(nodes) - 1; i >= 0; i-- {
			nodes[i].Close()
		}
	}()
	for _, c := range cfgs {
		n, err := node.Start(c)
		if err != nil {
			return &exitError{code: exitFailure, err: err}
		}
		nodes = append(nodes, n)
		log.Info("node started", "id", c.ID, "clients", n.ClientAddr(), "raft", c.RaftAddr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
			return nil
		case <-hup:
			if reload != nil {
				reload(nodes, log)
			}
		}
	}
}

func routerCmd() *cobra.Command {
	var (
		listen, level string
		seeds         []string
		sec           serveSecurity
	)
	cmd := &cobra.Command{
		Use:   "router",
		Short: "Run a stateless router in front of a cluster",
		RunE: func(cmd *cobra.Command, args []string) error {
			log := newLogger(level)
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP) // from the start: its default action ends the process
			defer signal.Stop(hup)
			rsec, serverTLS, err := sec.routerSecurity()
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			srv := router.New(router.Config{Seeds: seeds, Log: log, Security: rsec})
			ln, err := router.Listen(listen)
			if err != nil {
				return err
			}
			if serverTLS != nil {
				ln = tls.NewListener(ln, serverTLS)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				for {
					select {
					case <-ctx.Done():
						srv.Close()
						return
					case <-hup:
						sec.reloadRouter(srv, rsec.LiveTLS, log)
					}
				}
			}()
			log.Info("router listening", "addr", ln.Addr().String(), "seeds", seeds)
			return srv.Serve(ln)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7060", "client address")
	cmd.Flags().StringSliceVar(&seeds, "seeds", []string{"127.0.0.1:7070", "127.0.0.1:7071", "127.0.0.1:7072"}, "node client addresses")
	cmd.Flags().StringVar(&level, "log-level", "warn", "log level")
	sec.register(cmd.Flags())
	withConfigFile(cmd)
	return cmd
}
