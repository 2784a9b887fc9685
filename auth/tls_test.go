package auth

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestDevCertsHandshake: the generated PKI gives TLS 1.3, the node cert
// verifies as a node, a client cert carries its identity and is not a node.
func TestDevCertsHandshake(t *testing.T) {
	dir := t.TempDir()
	if err := (DevCerts{Dir: dir, Hosts: []string{"warden.example", "10.1.2.3"}, Clients: []string{"alice", "bob"}}).Generate(); err != nil {
		t.Fatal(err)
	}
	if err := (DevCerts{Dir: dir}).Generate(); err == nil {
		t.Fatal("a second run must not silently replace the CA")
	}
	if st, err := os.Stat(filepath.Join(dir, NodeKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("node key mode: %v %v", st.Mode(), err)
	}
	node, err := DirFiles(dir).Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		cfg          func() *tls.Config
		wantIdentity string
		wantNode     bool
	}{
		{"client certificate", func() *tls.Config {
			c, err := ClientConfig(filepath.Join(dir, CAFile), filepath.Join(dir, ClientCert), filepath.Join(dir, ClientKeyFile))
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, "alice", false},
		{"second client", func() *tls.Config {
			c, err := ClientConfig(filepath.Join(dir, CAFile), filepath.Join(dir, "client-bob.pem"), filepath.Join(dir, "client-bob-key.pem"))
			if err != nil {
				t.Fatal(err)
			}
			return c
		}, "bob", false},
		{"token client without a certificate", func() *tls.Config {
			c, _ := ClientConfig(filepath.Join(dir, CAFile), "", "")
			return c
		}, "", false},
		{"node", func() *tls.Config { return node.Peer.Clone() }, "warden node", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := handshake(t, node.Server, tc.cfg())
			if st.Version != tls.VersionTLS13 {
				t.Fatalf("version %x, want TLS 1.3", st.Version)
			}
			var id string
			var isNode bool
			if len(st.PeerCertificates) > 0 {
				id = IdentityFromCert(st.PeerCertificates[0])
				isNode = IsNode(st.PeerCertificates[0], st.PeerCertificates[1:], node.PeerCAs)
			}
			if id != tc.wantIdentity || isNode != tc.wantNode {
				t.Fatalf("identity %q node %v; want %q %v", id, isNode, tc.wantIdentity, tc.wantNode)
			}
		})
	}
}

func handshake(t *testing.T, server, client *tls.Config) tls.ConnectionState {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	client.ServerName = "127.0.0.1"
	errc := make(chan error, 1)
	sc := tls.Server(a, server)
	go func() { errc <- sc.Handshake() }()
	cc := tls.Client(b, client)
	if err := cc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return sc.ConnectionState()
}

// TestForeignCertificatesAreRefused: a client certificate from another CA,
// or a server the client's CA did not sign, fails the handshake.
func TestForeignCertificatesAreRefused(t *testing.T) {
	ours, theirs := t.TempDir(), t.TempDir()
	for _, d := range []string{ours, theirs} {
		if err := (DevCerts{Dir: d}).Generate(); err != nil {
			t.Fatal(err)
		}
	}
	node, err := DirFiles(ours).Load()
	if err != nil {
		t.Fatal(err)
	}
	foreignClient, _ := ClientConfig(filepath.Join(ours, CAFile), filepath.Join(theirs, ClientCert), filepath.Join(theirs, ClientKeyFile))
	if err := tryHandshake(node.Server, foreignClient); err == nil {
		t.Fatal("server accepted a client certificate from a foreign CA")
	}
	wrongCA, _ := ClientConfig(filepath.Join(theirs, CAFile), "", "")
	if err := tryHandshake(node.Server, wrongCA); err == nil {
		t.Fatal("client accepted a server its CA did not sign")
	}
}

func tryHandshake(server, client *tls.Config) error {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	client.ServerName = "127.0.0.1"
	errc := make(chan error, 1)
	go func() { errc <- tls.Server(a, server).Handshake(); a.Close() }()
	cerr := tls.Client(b, client).Handshake()
	b.Close()
	serr := <-errc
	if cerr != nil {
		return cerr
	}
	return serr
}
