package admin_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/admin"
	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
)

// guardPolicy: root has admin on /, monitor read on / (the admin port's
// read role), billing grants on one subtree only (no role on the admin
// port). "stranger" has a certificate from the client CA and no roles.
const guardPolicy = `
tokens: {monitor-token: monitor, root-token: root}
identities: {root: [admin], monitor: [reader], billing: [billing]}
roles:
  admin: [{prefix: /, perms: [all]}]
  reader: [{prefix: /, perms: [read]}]
  billing: [{prefix: /locks/billing, perms: [lock, read, watch, kv-write]}]
`

// tlsFixture is a TLS cluster with auth on and admin ports, holding a lock
// with a waiter (owners and leases on /v1/locks), an election and a secret
// KV value (in every backup).
type tlsFixture struct {
	c      *nodetest.Cluster
	certs  auth.DevCerts
	admin  string // node 1's admin address
	secret []byte
	shards []uint64
}

func startTLS(t *testing.T, nodes int, edit func(*node.Config)) *tlsFixture {
	t.Helper()
	certs := auth.DevCerts{Dir: t.TempDir(), Clients: []string{"root", "monitor", "billing", "stranger"}}
	if err := certs.Generate(); err != nil {
		t.Fatal(err)
	}
	pol, err := auth.Parse([]byte(guardPolicy))
	if err != nil {
		t.Fatal(err)
	}
	c := nodetest.Start(t, nodetest.Options{Nodes: nodes, Edit: func(cfg *node.Config) {
		files := auth.DirFiles(certs.Dir)
		cfg.TLS, cfg.Auth, cfg.AdminAddr = &files, pol, "127.0.0.1:0"
		// Advertised by name, as in Kubernetes: peers verify it against
		// the node certificate (which covers localhost).
		cfg.ClientAdvertise = strings.Replace(cfg.ClientAddr, "127.0.0.1", "localhost", 1)
		if edit != nil {
			edit(cfg)
		}
	}})
	f := &tlsFixture{c: c, certs: certs, admin: c.Nodes[0].Admin.Addr(), secret: []byte("db-password-7c1f"), shards: c.ShardIDs()}
	ctx := ctxT(t, 30*time.Second)
	cl, err := client.New(ctx, c.Endpoints(), client.WithTLS(f.clientTLS(t, "root")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	if _, err := cl.Put(ctx, "/secrets/db/password", f.secret); err != nil {
		t.Fatal(err)
	}
	s := session(t, cl)
	if err := client.NewMutex(s, "/locks/billing/job-1", client.WithOwner("worker-a")).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.NewElection(s, "/elections/scheduler/main").Campaign(ctx, []byte("node-a")); err != nil {
		t.Fatal(err)
	}
	return f
}

// clientTLS is the TLS config of identity's certificate ("" = none).
func (f *tlsFixture) clientTLS(t *testing.T, identity string) *tls.Config {
	t.Helper()
	cert, key := "", ""
	if identity != "" {
		cert, key = f.certs.ClientFiles(identity)
	}
	tc, err := auth.ClientConfig(filepath.Join(f.certs.Dir, auth.CAFile), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// httpsGet fetches url with tc, sending token as a bearer token when set.
func httpsGet(t *testing.T, tc *tls.Config, token, url string) (int, []byte) {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	defer hc.CloseIdleConnections()
	return fetch(t, hc, token, url)
}

// fetch GETs url with hc and a bearer token (when not "").
func fetch(t *testing.T, hc *http.Client, token, url string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestAdminPortRoles: over HTTPS with auth on, every endpoint answers only
// the roles it is for. The probes answer anyone with their status and
// nothing else; status, metrics, the shard view, the probes' detail and the
// status page (without its lock browser) need read on /; locks, sessions,
// elections, the audit trail and backups need admin on /. A caller without
// an identity gets 401, an identity without the role 403, and neither
// answer carries any of the data (a held lock's path, its owner, the secret
// KV value).
func TestAdminPortRoles(t *testing.T) {
	f := startTLS(t, 3, nil)
	base := "https://" + f.admin
	backup := fmt.Sprintf("/v1/backup/shards/%d", f.shards[0])

	type caller struct {
		name, cert, token string
		role              int // 0 none, 1 read, 2 admin
		anonymous         bool
	}
	callers := []caller{
		{name: "no credentials", anonymous: true},
		{name: "unknown token", token: "guess", anonymous: true},
		{name: "certificate identity without roles", cert: "stranger", anonymous: true},
		{name: "identity with no role on /", cert: "billing"},
		{name: "read-role certificate", cert: "monitor", role: 1},
		{name: "read-role token", token: "monitor-token", role: 1},
		{name: "admin certificate", cert: "root", role: 2},
		{name: "admin token", token: "root-token", role: 2},
	}
	endpoints := []struct {
		path string
		need int
		want string // in a granted answer
	}{
		{"/livez", 0, "ok"},
		{"/readyz", 0, "ok"},
		{"/healthz", 0, "ok"},
		{"/readyz/shard_leaders", 0, "ok"},
		{"/metrics", 1, "warden_"},
		{"/v1/status", 1, `"shards"`},
		{"/v1/shards", 1, `"replicas"`},
		{"/", 1, "Warden · node 1"},
		{"/v1/locks?prefix=/locks/billing", 2, "worker-a"},
		{"/v1/sessions", 2, `"ttl_ms"`},
		{"/v1/elections?prefix=/elections", 2, "node-a"},
		{"/v1/audit?prefix=/locks/billing", 2, `"records"`},
		{"/v1/backup/table", 2, ""},
		{backup, 2, ""},
	}
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			tc := f.clientTLS(t, c.cert)
			for _, e := range endpoints {
				code, body := httpsGet(t, tc, c.token, base+e.path)
				granted := c.role >= e.need
				switch {
				case granted && code != http.StatusOK:
					t.Errorf("GET %s: %d, want 200: %.200q", e.path, code, body)
				case granted && !bytes.Contains(body, []byte(e.want)):
					t.Errorf("GET %s: body lacks %q", e.path, e.want)
				case !granted && c.anonymous && code != http.StatusUnauthorized:
					t.Errorf("GET %s: %d, want 401: %.200q", e.path, code, body)
				case !granted && !c.anonymous && code != http.StatusForbidden:
					t.Errorf("GET %s: %d, want 403: %.200q", e.path, code, body)
				}
				if !granted {
					for _, leak := range [][]byte{f.secret, []byte("/locks/billing/job-1"), []byte("worker-a"), []byte("node-a")} {
						if bytes.Contains(body, leak) {
							t.Errorf("GET %s refused, but its answer holds %q", e.path, leak)
						}
					}
				}
			}
		})
	}

	t.Run("nodes advertise their client addresses by name", func(t *testing.T) {
		var st admin.Status
		code, body := httpsGet(t, f.clientTLS(t, "monitor"), "", base+"/v1/status")
		if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil {
			t.Fatalf("status: %d %v", code, err)
		}
		for _, n := range st.Nodes {
			if !strings.HasPrefix(n.ClientAddr, "localhost:") {
				t.Errorf("node %d advertises %q, want its ClientAdvertise", n.ID, n.ClientAddr)
			}
		}
	})

	t.Run("the backup holds the data the roles protect", func(t *testing.T) {
		found := false
		for _, id := range f.shards {
			code, body := httpsGet(t, f.clientTLS(t, "root"), "", fmt.Sprintf("%s/v1/backup/shards/%d", base, id))
			if code != http.StatusOK {
				t.Fatalf("backup of shard %d: %d %s", id, code, body)
			}
			found = found || bytes.Contains(body, f.secret)
		}
		if !found {
			t.Fatal("no shard's backup holds the secret value: the refusals above prove nothing")
		}
	})

	t.Run("probes reveal nothing without the read role", func(t *testing.T) {
		for _, path := range []string{"/livez?verbose", "/readyz?verbose", "/readyz?verbose&exclude=disk_writable"} {
			code, body := httpsGet(t, f.clientTLS(t, ""), "", base+path)
			if code != http.StatusOK || string(body) != "ok\n" {
				t.Errorf("anonymous GET %s: %d %q, want 200 \"ok\\n\"", path, code, body)
			}
			code, body = httpsGet(t, f.clientTLS(t, "monitor"), "", base+path)
			if code != http.StatusOK || !bytes.Contains(body, []byte("[+]")) {
				t.Errorf("read-role GET %s: %d %q, want the per-check list", path, code, body)
			}
		}
	})

	t.Run("the status page shows the lock browser to admins only", func(t *testing.T) {
		_, page := httpsGet(t, f.clientTLS(t, "monitor"), "", base+"/?prefix=/locks/billing")
		if bytes.Contains(page, []byte("worker-a")) || !bytes.Contains(page, []byte(`id="locks-hidden"`)) {
			t.Errorf("read-role page shows locks (or no note why not):\n%s", page)
		}
		_, page = httpsGet(t, f.clientTLS(t, "root"), "", base+"/?prefix=/locks/billing")
		if !bytes.Contains(page, []byte("worker-a")) || !bytes.Contains(page, []byte("https://")) {
			t.Errorf("admin page lacks the lock (or https links to the other nodes):\n%s", page)
		}
	})
}

// TestAdminPlaintextOffLoopbackRefused: a node whose admin port would serve
// without TLS on an address other machines reach does not start, with a
// typed error; the addresses here are documentation ranges, so nothing is
// ever bound to them.
func TestAdminPlaintextOffLoopbackRefused(t *testing.T) {
	ports := nodetest.FreePorts(t, 2)
	for _, addr := range []string{"192.0.2.1:7270", "[2001:db8::1]:7270"} {
		t.Run(addr, func(t *testing.T) {
			n, err := node.Start(node.Config{ID: 1, DataDir: t.TempDir(), ClientAddr: ports[0], RaftAddr: ports[1],
				Members: []node.Member{{ID: 1, RaftAddr: ports[1]}}, AdminAddr: addr})
			if err == nil {
				n.Close()
				t.Fatal("the node started")
			}
			if !errors.Is(err, admin.ErrPlaintextExposed) || !strings.Contains(err.Error(), "--insecure-plaintext-admin") {
				t.Fatalf("err = %v, want admin.ErrPlaintextExposed naming the opt-out", err)
			}
		})
	}
}

func TestCheckExposure(t *testing.T) {
	for _, tc := range []struct {
		addr      string
		tls, opt  bool
		wantError bool
	}{
		{"127.0.0.1:7270", false, false, false},
		{"127.0.0.2:7270", false, false, false},
		{"[::1]:7270", false, false, false},
		{"localhost:7270", false, false, false},
		{"0.0.0.0:7270", false, false, true},
		{":7270", false, false, true},
		{"[::]:7270", false, false, true},
		{"10.1.2.3:7270", false, false, true},
		{"[::ffff:10.1.2.3]:7270", false, false, true},
		{"10.1.2.3:7270", true, false, false},
		{"0.0.0.0:7270", false, true, false},
		{"no-port", false, false, true},
	} {
		err := admin.CheckExposure(tc.addr, tc.tls, tc.opt)
		if (err != nil) != tc.wantError {
			t.Errorf("CheckExposure(%q, tls=%v, anywhere=%v) = %v, want error %v", tc.addr, tc.tls, tc.opt, err, tc.wantError)
		}
	}
}

// TestAdminFloodLeavesProbesAnswering: one address keeps 150 idle
// connections (TCP only, no TLS handshake) and 150 half-sent requests (TLS
// done, a request header cut off) open against a TLS admin port, opening a
// new one whenever the node closes one, for longer than the header timeout.
// The node keeps 32 of them (the per-address limit) and resets the rest at
// accept; probes from another address, each on a new connection as the
// kubelet sends them, all answer.
func TestAdminFloodLeavesProbesAnswering(t *testing.T) {
	f := startTLS(t, 1, func(cfg *node.Config) { cfg.AdminLimits.HeaderTimeout = time.Second })
	n := f.c.Nodes[0].Admin
	flooder := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}
	prober := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	if c, err := prober.Dial("tcp", f.admin); err != nil {
		t.Skipf("cannot dial from 127.0.0.2 here: %v", err)
	} else {
		c.Close()
	}
	anonymous := f.clientTLS(t, "")
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	for i := 0; i < 300; i++ {
		halfSent := i%2 == 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				holdOne(ctx, flooder, f.admin, anonymous, halfSent)
				select { // a reset connection is dialled again, not in a tight loop
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
	}
	waitFor(t, func() bool { return n.ConnsRefused() >= 300-32 })
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: prober.DialContext, TLSClientConfig: anonymous, DisableKeepAlives: true}}
	// 3 s of probes: the held connections time out (header timeout 1 s)
	// and are replaced while they run.
	probes, until := 0, time.Now().Add(3*time.Second)
	for ; time.Now().Before(until); probes++ {
		for _, path := range []string{"/livez", "/readyz"} {
			resp, err := hc.Get("https://" + f.admin + path)
			if err != nil {
				t.Fatalf("probe %d %s during the flood: %v", probes, path, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("probe %d %s during the flood: %d", probes, path, resp.StatusCode)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d probes answered; the node reset %d flood connections", probes, n.ConnsRefused())
}

// holdOne opens a connection to addr and keeps it until the node closes it
// or ctx ends: idle (TCP only) or half-sent (a TLS handshake, then part of
// a request header).
func holdOne(ctx context.Context, d *net.Dialer, addr string, tc *tls.Config, halfSent bool) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return
	}
	if halfSent {
		tc = tc.Clone()
		tc.ServerName, _, _ = net.SplitHostPort(addr)
		t := tls.Client(c, tc)
		t.SetDeadline(time.Now().Add(5 * time.Second))
		if t.Handshake() == nil {
			t.Write([]byte("GET /livez HTTP/1.1\r\nHost: warden\r\nX-Slow: "))
		}
		t.SetDeadline(time.Time{})
		c = t
	}
	unblock := context.AfterFunc(ctx, func() { c.Close() })
	io.Copy(io.Discard, c)
	unblock()
	c.Close()
}
