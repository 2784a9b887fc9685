package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/wire"
)

// TestReloadOnSIGHUP: `warden serve` and `warden router` read the auth
// config and the TLS files again on SIGHUP, without a restart. A token
// added to the file works on new connections (at the router and at every
// node); a removed one is refused on new connections and ends the
// connections it opened at their next request; a file that does not load
// is logged and the old tokens stay. A renewed node certificate is what new
// TLS connections get; a broken key file is logged and the certificate in
// use stays.
func TestReloadOnSIGHUP(t *testing.T) {
	sc := startSecureServers(t)
	raddr, _ := sc.startRouter(t, "router", "--tls-dir", sc.certs, "--auth-config", sc.policy)
	waitListening(t, raddr)
	tokenTLS := sc.tlsAs(t, "")
	everywhere := append([]string{raddr}, sc.clients...)
	hup := func() {
		t.Helper()
		for _, p := range sc.procs {
			if err := p.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		}
	}
	helloAt := func(addr, token string) wire.Code {
		_, hello := nodetest.DialWire(t, addr, tokenTLS, token, 0)
		return hello.Code
	}
	// until waits for every address to answer a hello with token as want.
	until := func(what, token string, want wire.Code) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for _, addr := range everywhere {
			for helloAt(addr, token) != want {
				if time.Now().After(deadline) {
					t.Fatalf("%s: hello with %q at %s is not %v", what, token, addr, want)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	writeFile := func(path, content string) { // atomically: the nodes may read it any time
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	logged := func(what string) int {
		n := 0
		for _, name := range []string{"router", "n1", "n2", "n3"} {
			n += strings.Count(sc.log(name), what)
		}
		return n
	}

	bobOld := as(t, raddr, tokenTLS, "bob-token")
	if r := eventually(t, bobOld, &wire.Request{Op: wire.OpLockInfo, Path: "/locks/billing/r"}); r.Code != wire.NotFound {
		t.Fatalf("bob read before the reload: %v %s", r.Code, r.Msg)
	}
	if c := helloAt(raddr, "frank-token"); c != wire.Unauthorized {
		t.Fatalf("frank before the reload: %v", c)
	}

	// frank's token added, bob's removed (bob stays an identity).
	policy := strings.Replace(secPolicy, "  bob-token: bob\n", "  frank-token: frank\n", 1)
	policy = strings.Replace(policy, "  alice: [billing]\n", "  alice: [billing]\n  frank: [billing]\n", 1)
	writeFile(sc.policy, policy)
	hup()
	until("added token", "frank-token", wire.OK)
	until("removed token", "bob-token", wire.Unauthorized)
	t.Run("an added token works through the router and at the nodes", func(t *testing.T) {
		for i, addr := range everywhere {
			frank := as(t, addr, tokenTLS, "frank-token")
			path := "/locks/billing/frank" + string(rune('a'+i))
			if r := eventually(t, frank, &wire.Request{Op: wire.OpAcquire, Path: path, TTL: 30000}); r.Code != wire.OK {
				t.Fatalf("frank acquire %s at %s: %v %s", path, addr, r.Code, r.Msg)
			}
			if r := frank.Do(&wire.Request{Op: wire.OpKVPut, Path: "/config/app/frank", Value: []byte("x")}); r.Code != wire.Unauthorized {
				t.Fatalf("frank has no kv-write: %v %s", r.Code, r.Msg)
			}
		}
	})
	t.Run("a removed token ends the connection it opened", func(t *testing.T) {
		if r := bobOld.Do(&wire.Request{Op: wire.OpLockInfo, Path: "/locks/billing/r"}); r.Code != wire.Unauthorized {
			t.Fatalf("bob's old connection after the reload: %v %s", r.Code, r.Msg)
		}
		if r := bobOld.Recv(5 * time.Second); r != nil {
			t.Fatalf("bob's old connection still open: %+v", r)
		}
	})

	t.Run("a policy that does not load keeps the old one", func(t *testing.T) {
		before := logged("does not load")
		writeFile(sc.policy, "tokens: {bob-token: bob}\nroles: {x: [{prefix: /, perms: [everything]}]}\n")
		hup()
		deadline := time.Now().Add(30 * time.Second)
		for logged("does not load") < before+4 {
			if time.Now().After(deadline) {
				t.Fatalf("the bad policy was not logged by all four processes")
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, addr := range everywhere {
			if c := helloAt(addr, "frank-token"); c != wire.OK {
				t.Fatalf("frank at %s after a bad reload: %v", addr, c)
			}
			if c := helloAt(addr, "bob-token"); c != wire.Unauthorized {
				t.Fatalf("bob at %s after a bad reload: %v", addr, c)
			}
		}
	})

	servedCert := func(addr string) []byte {
		t.Helper()
		tc := tokenTLS.Clone()
		tc.ServerName = "127.0.0.1"
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, tc)
		if err != nil {
			t.Fatalf("TLS to %s: %v", addr, err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Raw
	}
	certOnDisk := func() []byte {
		b, err := os.ReadFile(filepath.Join(sc.certs, auth.NodeCertFile))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		return blk.Bytes
	}
	t.Run("a renewed node certificate is used by new connections", func(t *testing.T) {
		old := certOnDisk()
		for _, addr := range everywhere {
			if !bytes.Equal(servedCert(addr), old) {
				t.Fatalf("%s does not serve node.pem before the renewal", addr)
			}
		}
		certPEM, keyPEM := renewNodeCert(t, sc.certs)
		writeFile(filepath.Join(sc.certs, auth.NodeKeyFile), string(keyPEM))
		writeFile(filepath.Join(sc.certs, auth.NodeCertFile), string(certPEM))
		renewed := certOnDisk()
		hup()
		deadline := time.Now().Add(30 * time.Second)
		for _, addr := range everywhere {
			for !bytes.Equal(servedCert(addr), renewed) {
				if time.Now().After(deadline) {
					t.Fatalf("%s still serves the old certificate after SIGHUP", addr)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		frank := as(t, raddr, tokenTLS, "frank-token")
		if r := eventually(t, frank, &wire.Request{Op: wire.OpAcquire, Path: "/locks/billing/renewed", TTL: 30000}); r.Code != wire.OK {
			t.Fatalf("acquire through the router after the renewal: %v %s", r.Code, r.Msg)
		}
	})
	t.Run("a key that does not load keeps the certificate in use", func(t *testing.T) {
		inUse := certOnDisk()
		before := logged("TLS files not reloaded")
		writeFile(filepath.Join(sc.certs, auth.NodeKeyFile), "not a key\n")
		hup()
		deadline := time.Now().Add(30 * time.Second)
		for logged("TLS files not reloaded") < before+4 {
			if time.Now().After(deadline) {
				t.Fatalf("the broken key file was not logged by all four processes")
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, addr := range everywhere {
			if !bytes.Equal(servedCert(addr), inUse) {
				t.Fatalf("%s changed its certificate on a broken key file", addr)
			}
			frank := as(t, addr, tokenTLS, "frank-token")
			if r := frank.Do(&wire.Request{Op: wire.OpLockInfo, Path: "/locks/billing/renewed"}); r.Code != wire.OK || len(r.Holders) != 1 {
				t.Fatalf("read at %s after a bad TLS reload: %v %s", addr, r.Code, r.Msg)
			}
		}
	})
}

// renewNodeCert issues a new node certificate (new key, same SANs) from the
// node CA in dir, as a renewal from the same PKI would.
func renewNodeCert(t *testing.T, dir string) (certPEM, keyPEM []byte) {
	t.Helper()
	ca, err := tls.LoadX509KeyPair(filepath.Join(dir, auth.CAFile), filepath.Join(dir, auth.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "warden node (renewed)"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}
