package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// secPolicy is the auth config of the secure process tests.
const secPolicy = `
tokens:
  alice-token: alice
  erin-token: erin
  bob-token: bob
identities:
  alice: [billing]
  erin: [billing]
  bob: [reader]
  carol: [config]
  admin: [admin]
roles:
  billing:
    - {prefix: /locks/billing, perms: [lock, read, watch]}
  reader:
    - {prefix: /, perms: [read]}
  config:
    - {prefix: /config/app, perms: [kv-write, read]}
  admin:
    - {prefix: /, perms: [all]}
`

// secCluster is three `warden serve` processes with TLS (from `warden
// certs`) and auth on, and the files they were started with.
type secCluster struct {
	*procCluster
	dir, certs, policy string
	clients            []string // client addresses
}

func startSecureServers(t *testing.T) *secCluster {
	t.Helper()
	sc := &secCluster{dir: t.TempDir()}
	sc.certs = filepath.Join(sc.dir, "certs")
	sc.policy = filepath.Join(sc.dir, "policy.yaml")
	if out, err := exec.Command(wardenBin, "certs", "--dir", sc.certs, "--clients", "admin,carol,dave").CombinedOutput(); err != nil {
		t.Fatalf("warden certs: %v: %s", err, out)
	}
	if err := os.WriteFile(sc.policy, []byte(secPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := nodetest.FreePorts(t, 6)
	sc.clients = addrs[:3]
	var members []string
	for i := 0; i < 3; i++ {
		members = append(members, fmt.Sprintf("%d=%s", i+1, addrs[3+i]))
	}
	sc.procCluster = &procCluster{t: t, endpoints: strings.Join(addrs[:3], ",")}
	t.Cleanup(sc.kill)
	for i := 0; i < 3; i++ {
		sc.spawn(t, fmt.Sprintf("n%d", i+1), "serve", "--id", strconv.Itoa(i+1),
			"--data-dir", filepath.Join(sc.dir, fmt.Sprintf("n%d", i+1)),
			"--listen", addrs[i], "--raft", addrs[3+i], "--members", strings.Join(members, ","), "--shards", "2",
			"--tls-dir", sc.certs, "--auth-config", sc.policy)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		// The CLI with --tls-dir presents client.pem (CN admin).
		out, _, code := sc.run(t, "--tls-dir", sc.certs, "status", "-o", "json")
		if code == 0 && ready(out) {
			return sc
		}
		if time.Now().After(deadline) {
			t.Fatalf("TLS cluster of warden serve processes not ready: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// spawn starts a warden process logging to <name>.log; kill ends it.
func (sc *secCluster) spawn(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(wardenBin, args...)
	logf, err := os.OpenFile(filepath.Join(sc.dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc.procs = append(sc.procs, cmd)
	return cmd
}

func (sc *secCluster) log(name string) string {
	b, _ := os.ReadFile(filepath.Join(sc.dir, name+".log"))
	return string(b)
}

// startRouter runs `warden router` in front of the cluster with extra flags.
func (sc *secCluster) startRouter(t *testing.T, name string, flags ...string) (string, *exec.Cmd) {
	t.Helper()
	addr := nodetest.FreePorts(t, 1)[0]
	args := append([]string{"router", "--listen", addr, "--seeds", strings.Join(sc.clients, ","), "--log-level", "info"}, flags...)
	return addr, sc.spawn(t, name, args...)
}

// tlsAs is a client TLS config verifying servers with the node CA and
// presenting the client certificate of name ("" = none, token clients).
func (sc *secCluster) tlsAs(t *testing.T, name string) *tls.Config {
	t.Helper()
	cert, key := "", ""
	if name != "" {
		cert, key = auth.DevCerts{Dir: sc.certs}.ClientFiles(name) // made with --clients admin,...: admin is client.pem
	}
	tc, err := auth.ClientConfig(filepath.Join(sc.certs, auth.CAFile), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// as is an authenticated connection through addr.
func as(t *testing.T, addr string, tc *tls.Config, token string) *nodetest.WireConn {
	t.Helper()
	p, hello := nodetest.DialWire(t, addr, tc, token, 0)
	if hello.Code != wire.OK {
		t.Fatalf("hello (token %q) at %s: %v %s", token, addr, hello.Code, hello.Msg)
	}
	return p
}

// eventually retries req until it is answered OK, NotFound or
// Unauthorized (a fresh router has no range table for a moment).
func eventually(t *testing.T, p *nodetest.WireConn, req *wire.Request) *wire.Response {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := p.Do(req)
		if r.Code == wire.OK || r.Code == wire.Unauthorized || r.Code == wire.NotFound || time.Now().After(deadline) {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSecureRouterTier: `warden router` with TLS and auth in front of
// `warden serve` nodes with TLS and auth, all from `warden certs`. Every
// request goes through the router and is forwarded to the nodes leading its
// shard (paths on both shards). Each identity is granted what its roles
// allow and refused the rest with nothing changed; a connection without
// credentials, with unknown ones or in plaintext gets nowhere; a client
// cannot pass for another identity or for a node through the router; and a
// router without the auth config is not let forward by the nodes.
func TestSecureRouterTier(t *testing.T) {
	sc := startSecureServers(t)
	raddr, _ := sc.startRouter(t, "router", "--tls-dir", sc.certs, "--auth-config", sc.policy)
	tokenTLS := sc.tlsAs(t, "")
	waitListening(t, raddr)

	alice := as(t, raddr, tokenTLS, "alice-token")
	erin := as(t, raddr, tokenTLS, "erin-token")
	bob := as(t, raddr, tokenTLS, "bob-token")
	carol := as(t, raddr, sc.tlsAs(t, "carol"), "")
	admin := as(t, raddr, sc.tlsAs(t, "admin"), "")

	held := []string{"/locks/billing/a1", "/locks/billing/b2", "/locks/billing/c3", "/locks/billing/d4"}
	tokens := map[string]uint64{}
	t.Run("granted to the right identity", func(t *testing.T) {
		for _, p := range held {
			r := eventually(t, alice, &wire.Request{Op: wire.OpAcquire, Path: p, TTL: 60000})
			if r.Code != wire.OK || r.Token == 0 {
				t.Fatalf("alice acquire %s through the router: %v %s", p, r.Code, r.Msg)
			}
			tokens[p] = r.Token
		}
		if r := carol.Do(&wire.Request{Op: wire.OpKVPut, Path: "/config/app/keep", Value: []byte("1")}); r.Code != wire.OK {
			t.Fatalf("carol (certificate identity) put: %v %s", r.Code, r.Msg)
		}
		if r := bob.Do(&wire.Request{Op: wire.OpLockInfo, Path: held[1]}); r.Code != wire.OK || len(r.Holders) != 1 {
			t.Fatalf("bob read: %v %s %+v", r.Code, r.Msg, r.Holders)
		}
	})

	t.Run("refused to the wrong identity", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			who  *nodetest.WireConn
			req  *wire.Request
		}{
			{"lock without the perm", bob, &wire.Request{Op: wire.OpAcquire, Path: "/locks/billing/free", TTL: 30000}},
			{"lock on a sibling sharing a name prefix", alice, &wire.Request{Op: wire.OpAcquire, Path: "/locks/billingX/a", TTL: 30000}},
			{"read without read", carol, &wire.Request{Op: wire.OpLockInfo, Path: held[0]}},
			{"kv write without kv-write", alice, &wire.Request{Op: wire.OpKVPut, Path: "/config/app/x", Value: []byte("v")}},
			{"kv delete without kv-write", bob, &wire.Request{Op: wire.OpKVDelete, Path: "/config/app/keep"}},
			// erin may lock /locks/billing but the lock is alice's: the
			// Identity she puts in the request is overwritten by the
			// router with the one she proved.
			{"release another identity's lock claiming to be it", erin,
				&wire.Request{Op: wire.OpRelease, Path: held[2], Identity: "alice"}},
			{"renew another identity's lock claiming to be it", erin,
				&wire.Request{Op: wire.OpRenew, Path: held[3], TTL: 60000, Identity: "alice"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				switch tc.req.Op {
				case wire.OpRelease, wire.OpRenew:
					tc.req.Token = tokens[tc.req.Path]
				}
				if r := tc.who.Do(tc.req); r.Code != wire.Unauthorized {
					t.Fatalf("got %v %q, want Unauthorized", r.Code, r.Msg)
				}
			})
		}
	})

	t.Run("handshake refused", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			token string
			tls   *tls.Config
			flags uint32
		}{
			{"no client certificate and no token", "", tokenTLS, 0},
			{"unknown token", "guess", tokenTLS, 0},
			{"certificate identity without roles", "", sc.tlsAs(t, "dave"), 0},
			{"client token claiming to be a node", "alice-token", tokenTLS, wire.FlagPeer},
			{"client certificate claiming to be a node", "", sc.tlsAs(t, "admin"), wire.FlagPeer},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p, hello := nodetest.DialWire(t, raddr, tc.tls, tc.token, tc.flags)
				if hello.Code != wire.Unauthorized || hello.Msg == "" {
					t.Fatalf("hello: %v %q, want Unauthorized with a message", hello.Code, hello.Msg)
				}
				if r := p.Recv(5 * time.Second); r != nil {
					t.Fatalf("connection still open after a refused hello: %+v", r)
				}
			})
		}
	})

	t.Run("plaintext client refused by a TLS router", func(t *testing.T) {
		p, hello := nodetest.DialWire(t, raddr, nil, "alice-token", 0)
		if hello.Code == wire.OK {
			t.Fatalf("plaintext hello answered OK")
		}
		if r := p.Do(&wire.Request{Op: wire.OpAcquire, Path: "/locks/billing/plain", TTL: 30000}); r.Code == wire.OK {
			t.Fatalf("plaintext acquire answered OK")
		}
	})

	t.Run("router without the auth config cannot forward", func(t *testing.T) {
		// It holds the node certificate, so the nodes accept it as a
		// peer; without the policy it would pass every client's request
		// on unchecked. The nodes tell it auth is on and it refuses.
		open, _ := sc.startRouter(t, "router-noauth", "--tls-dir", sc.certs)
		waitListening(t, open)
		anyone := as(t, open, tokenTLS, "")
		for _, req := range []*wire.Request{
			{Op: wire.OpAcquire, Path: "/locks/billing/free", TTL: 30000},
			{Op: wire.OpKVPut, Path: "/config/app/x", Value: []byte("v")},
		} {
			if r := anyone.Do(req); r.Code == wire.OK {
				t.Fatalf("%v %s through a router without auth: OK", req.Op, req.Path)
			}
		}
		if !strings.Contains(sc.log("router-noauth"), "auth") {
			t.Fatalf("the router without auth does not say why it cannot forward:\n%s", sc.log("router-noauth"))
		}
	})

	t.Run("router with a client certificate cannot act as a node", func(t *testing.T) {
		// Its certificate chains to the client CA, not the node CA: the
		// nodes refuse its forwarding connections.
		fake, _ := sc.startRouter(t, "router-fake", "--cacert", filepath.Join(sc.certs, auth.CAFile),
			"--cert", filepath.Join(sc.certs, auth.ClientCert), "--key", filepath.Join(sc.certs, auth.ClientKeyFile),
			"--auth-config", sc.policy)
		waitListening(t, fake)
		insecure := sc.tlsAs(t, "")
		insecure.InsecureSkipVerify = true // its certificate is no server certificate
		p := as(t, fake, insecure, "alice-token")
		if r := p.Do(&wire.Request{Op: wire.OpAcquire, Path: "/locks/billing/fake", TTL: 30000}); r.Code == wire.OK {
			t.Fatalf("acquire through a router with a client certificate: OK")
		}
		if !strings.Contains(sc.log("router-fake"), "node certificate") {
			t.Fatalf("the router does not say the nodes refused it:\n%s", sc.log("router-fake"))
		}
	})

	t.Run("nothing changed by the refusals", func(t *testing.T) {
		for _, p := range held {
			r := admin.Do(&wire.Request{Op: wire.OpLockInfo, Path: p})
			if r.Code != wire.OK || len(r.Holders) != 1 || r.Holders[0].Token != tokens[p] {
				t.Fatalf("%s after refusals: %v %s %+v", p, r.Code, r.Msg, r.Holders)
			}
		}
		for _, p := range []string{"/locks/billing/free", "/locks/billingX/a", "/locks/billing/plain", "/locks/billing/fake"} {
			r := admin.Do(&wire.Request{Op: wire.OpLockInfo, Path: p})
			if r.Code != wire.OK && r.Code != wire.NotFound || len(r.Holders)+len(r.Waiters) != 0 {
				t.Fatalf("%s changed by a refused request: %v %+v %+v", p, r.Code, r.Holders, r.Waiters)
			}
		}
		if r := admin.Do(&wire.Request{Op: wire.OpKVGet, Path: "/config/app/x"}); r.Code != wire.NotFound {
			t.Fatalf("refused put left a key: %v", r.Code)
		}
		if r := admin.Do(&wire.Request{Op: wire.OpKVGet, Path: "/config/app/keep"}); r.Code != wire.OK || string(r.Value) != "1" {
			t.Fatalf("refused delete removed the key: %v", r.Code)
		}
		if r := alice.Do(&wire.Request{Op: wire.OpRelease, Path: held[2], Token: tokens[held[2]]}); r.Code != wire.OK {
			t.Fatalf("the holder's release through the router: %v %s", r.Code, r.Msg)
		}
	})
}

// waitListening waits until addr accepts TCP connections.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			nc.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
