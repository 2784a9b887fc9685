package main

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/statemachine"
)

// serveSecurity holds the TLS, auth and limit flags of `warden serve`.
type serveSecurity struct {
	plaintext                   bool
	tlsDir                      string
	caFile, clientCA, cert, key string
	authConfig, peerSecretFile  string
	maxConnsPerAddr, maxWatches int
	rate                        float64
	burst                       int
	acceptRate, ipByteRate      float64
	refusalRate                 float64
	ipFrameRate                 float64
	frameTimeout, idleTimeout   time.Duration
	quotas                      quotaFlags
}

// quotaFlags are the per-identity quotas (auth on). The router's count per
// node; the state machine's per shard, and must be the same on every node
// (statemachine.Config).
type quotaFlags struct {
	Watches int // watch streams per identity per node
	Leases  int // session and single-lock leases per identity per shard
	Locks   int // holds + queued requests per identity per shard
	Waiters int // queued requests per identity per shard
}

func (s *serveSecurity) register(f *pflag.FlagSet) {
	f.BoolVar(&s.plaintext, "plaintext", false, "serve without TLS (an explicit choice: clients, Raft and admin traffic unencrypted)")
	f.StringVar(&s.tlsDir, "tls-dir", "", "`dir` made by warden certs (ca.pem, client-ca.pem, node.pem, node-key.pem)")
	f.StringVar(&s.caFile, "cacert", "", "node CA (verifies other nodes; clients verify this node with it)")
	f.StringVar(&s.clientCA, "client-cacert", "", "client CA (verifies client certificates; optional)")
	f.StringVar(&s.cert, "cert", "", "this node's certificate")
	f.StringVar(&s.key, "key", "", "this node's private key")
	f.StringVar(&s.authConfig, "auth-config", "", "YAML file of tokens, identities and roles: turns authentication on (deny by default)")
	f.StringVar(&s.peerSecretFile, "peer-secret-file", "", "file holding the cluster secret that authenticates node-to-node forwarding without TLS")
	f.IntVar(&s.maxConnsPerAddr, "max-conns-per-addr", 1024, "open client connections per IP address (-1: unlimited)")
	f.IntVar(&s.maxWatches, "max-watches", 4096, "watch streams per connection")
	f.Float64Var(&s.rate, "rate", 0, fmt.Sprintf("requests per second per identity (the client IP with auth off) on this node, token bucket (0: %d with auth on, unlimited without; -1: unlimited)", router.DefaultIdentityRate))
	f.IntVar(&s.burst, "burst", 0, "token bucket depth (default: the rate)")
	d := statemachine.DefaultConfig()
	f.IntVar(&s.quotas.Watches, "identity-watches", router.DefaultIdentityWatches, "watch streams per identity on this node, all its connections together (auth on; -1: unlimited)")
	f.IntVar(&s.quotas.Leases, "identity-leases", d.MaxOwnerLeases, "session and single-lock leases per identity per shard (auth on; the same on every node)")
	f.IntVar(&s.quotas.Locks, "identity-locks", d.MaxOwnerLocks, "held locks + queued requests per identity per shard (auth on; the same on every node)")
	f.IntVar(&s.quotas.Waiters, "identity-waiters", d.MaxOwnerWaiters, "queued acquires and campaigns per identity per shard (auth on; the same on every node)")
	f.Float64Var(&s.acceptRate, "accept-rate", 2000, "connections accepted per second, all addresses; over it they wait in the kernel backlog (-1: unpaced)")
	f.Float64Var(&s.ipByteRate, "ip-byte-rate", 128<<20, "bytes per second read from one client IP; over it its connections are not read (-1: unlimited)")
	f.Float64Var(&s.ipFrameRate, "ip-frame-rate", 500_000, "frames per second read from one client IP (-1: unlimited)")
	f.DurationVar(&s.frameTimeout, "frame-timeout", router.DefaultFrameTimeout, "a client's frame must arrive whole within this once begun, or the connection is closed")
	f.DurationVar(&s.idleTimeout, "idle-timeout", router.DefaultIdleTimeout, "close a client connection silent this long with nothing open: no request, wait, watch or hold stream (-1s: never)")
	f.Float64Var(&s.refusalRate, "refusal-rate", 200, "refused connections answered with a TooMany frame per second, all addresses; past it they are reset without an answer (-1: answer all)")
}

// apply fills the node config. Serving without TLS must be asked for.
func (s *serveSecurity) apply(cfg *node.Config) error {
	files := auth.TLSFiles{CA: s.caFile, ClientCA: s.clientCA, Cert: s.cert, Key: s.key}
	if s.tlsDir != "" {
		files = auth.DirFiles(s.tlsDir)
	}
	useTLS := files != (auth.TLSFiles{})
	switch {
	case useTLS && s.plaintext:
		return errors.New("--plaintext and TLS flags together: choose one")
	case !useTLS && !s.plaintext:
		return errors.New("choose TLS (--tls-dir, made by `warden certs --dir ./certs`, or --cacert/--cert/--key) or --plaintext")
	case useTLS:
		if err := files.Validate(); err != nil {
			return err
		}
		cfg.TLS = &files
	}
	if s.authConfig != "" {
		pol, err := auth.Load(s.authConfig)
		if err != nil {
			return err
		}
		cfg.Auth = pol
	}
	if s.peerSecretFile != "" {
		b, err := os.ReadFile(s.peerSecretFile)
		if err != nil {
			return err
		}
		cfg.PeerSecret = string(trimSpace(b))
	}
	sec := &cfg.Router.Security
	sec.MaxConnsPerAddr, sec.MaxWatches, sec.Rate, sec.Burst = s.maxConnsPerAddr, s.maxWatches, s.rate, s.burst
	sec.MaxIdentityWatches = s.quotas.Watches
	if s.quotas.Leases < 0 || s.quotas.Locks < 0 || s.quotas.Waiters < 0 {
		return errors.New("--identity-leases, --identity-locks and --identity-waiters must not be negative")
	}
	cfg.SM.MaxOwnerLeases, cfg.SM.MaxOwnerLocks, cfg.SM.MaxOwnerWaiters = s.quotas.Leases, s.quotas.Locks, s.quotas.Waiters
	sec.AcceptRate, sec.ByteRate, sec.FrameRate, sec.RefusalRate = s.acceptRate, s.ipByteRate, s.ipFrameRate, s.refusalRate
	if s.frameTimeout <= 0 {
		return fmt.Errorf("--frame-timeout %v: must be positive", s.frameTimeout)
	}
	if s.idleTimeout == 0 {
		return errors.New("--idle-timeout 0: give a duration, or -1s for never")
	}
	sec.FrameTimeout, sec.IdleTimeout = s.frameTimeout, s.idleTimeout
	return nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// randomSecret is the peer secret of the nodes of one `warden dev` process,
// so a local client cannot pass for a forwarding node there either.
func randomSecret() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Client-side flags shared by every CLI verb.
var cliSec struct {
	tlsDir, caFile, cert, key, token string
}

func addClientSecurityFlags(pf *pflag.FlagSet) {
	pf.StringVar(&cliSec.tlsDir, "tls-dir", os.Getenv("WARDEN_TLS_DIR"), "`dir` made by warden certs: TLS with ca.pem and client.pem (env WARDEN_TLS_DIR)")
	pf.StringVar(&cliSec.caFile, "cacert", "", "CA that signed the nodes' certificates (turns TLS on)")
	pf.StringVar(&cliSec.cert, "cert", "", "client certificate (identity = its CN or URI SAN)")
	pf.StringVar(&cliSec.key, "key", "", "client private key")
	pf.StringVar(&cliSec.token, "token", os.Getenv("WARDEN_TOKEN"), "bearer token sent in the handshake (env WARDEN_TOKEN)")
}

// clientSecurityOptions turns the flags into client options.
func clientSecurityOptions() ([]client.Option, error) {
	var opts []client.Option
	if cliSec.token != "" {
		opts = append(opts, client.WithCredentials(cliSec.token))
	}
	ca, cert, key := cliSec.caFile, cliSec.cert, cliSec.key
	if cliSec.tlsDir != "" {
		ca = pickS(ca, filepath.Join(cliSec.tlsDir, auth.CAFile))
		if cert == "" {
			if _, err := os.Stat(filepath.Join(cliSec.tlsDir, auth.ClientCert)); err == nil {
				cert, key = filepath.Join(cliSec.tlsDir, auth.ClientCert), filepath.Join(cliSec.tlsDir, auth.ClientKeyFile)
			}
		}
	}
	if ca == "" && cert == "" {
		return opts, nil
	}
	tc, err := auth.ClientConfig(ca, cert, key)
	if err != nil {
		return nil, err
	}
	return append(opts, client.WithTLS(tc)), nil
}

// routerSecurity is the standalone router's share of the flags. Without any
// TLS flag it stays plaintext, as before.
func (s *serveSecurity) routerSecurity() (router.Security, *tls.Config, error) {
	if s.tlsDir == "" && s.caFile == "" && s.clientCA == "" && s.cert == "" && s.key == "" {
		s.plaintext = true
	}
	var cfg node.Config
	if err := s.apply(&cfg); err != nil {
		return router.Security{}, nil, err
	}
	return node.RouterSecurity(&cfg)
}

// reloadPolicy reads --auth-config again: nil when auth is off or the file
// does not load (then the error is logged and the old policy stays).
func (s *serveSecurity) reloadPolicy(log *slog.Logger) *auth.Policy {
	if s.authConfig == "" {
		return nil
	}
	pol, err := auth.Load(s.authConfig)
	if err != nil {
		log.Error("reload: the auth config does not load; the old tokens and roles stay in use", "file", s.authConfig, "err", err)
		return nil
	}
	return pol
}

// reloadNodes is `warden serve`'s SIGHUP: the auth config and the TLS
// files are read again; what does not load is logged and kept as it was.
func (s *serveSecurity) reloadNodes(nodes []*node.Node, log *slog.Logger) {
	pol := s.reloadPolicy(log)
	for _, n := range nodes {
		if err := n.Reload(pol); err != nil {
			log.Error("reload", "err", err)
		}
	}
	log.Info("reload: done (SIGHUP)", "auth-config", s.authConfig != "", "policy-replaced", pol != nil)
}

// reloadRouter is `warden router`'s SIGHUP.
func (s *serveSecurity) reloadRouter(srv *router.Server, live *auth.LiveTLS, log *slog.Logger) {
	if live != nil {
		if err := live.Reload(); err != nil {
			log.Error("reload: TLS files not reloaded, the old certificates stay in use", "err", err)
		}
	}
	pol := s.reloadPolicy(log)
	if pol != nil {
		if err := srv.SetPolicy(pol); err != nil {
			log.Error("reload", "err", err)
		}
	}
	log.Info("reload: done (SIGHUP)", "auth-config", s.authConfig != "", "policy-replaced", pol != nil)
}
