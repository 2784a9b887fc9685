package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

// TLSFiles names a node's TLS material. Nodes and clients have separate CAs,
// so a client certificate can never pass for a node (on the Raft port, or as
// a forwarding connection on the client port).
type TLSFiles struct {
	CA       string // signs node certificates: clients verify servers with it, nodes verify each other
	ClientCA string // signs client certificates ("" = clients authenticate with tokens only)
	Cert     string // this node's certificate (used as server and as client of other nodes)
	Key      string
}

// Names of the files `warden certs` writes into a directory.
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	ClientCAFile  = "client-ca.pem"
	ClientCAKey   = "client-ca-key.pem"
	NodeCertFile  = "node.pem"
	NodeKeyFile   = "node-key.pem"
	ClientCert    = "client.pem"
	ClientKeyFile = "client-key.pem"
)

// DirFiles is the node's material in a directory made by `warden certs`.
func DirFiles(dir string) TLSFiles {
	f := TLSFiles{CA: filepath.Join(dir, CAFile), Cert: filepath.Join(dir, NodeCertFile), Key: filepath.Join(dir, NodeKeyFile)}
	if _, err := os.Stat(filepath.Join(dir, ClientCAFile)); err == nil {
		f.ClientCA = filepath.Join(dir, ClientCAFile)
	}
	return f
}

// Validate reports a missing piece.
func (f TLSFiles) Validate() error {
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return errors.New("auth: TLS needs a CA, a certificate and a key")
	}
	return nil
}

// NodeTLS is what a node needs to speak TLS.
type NodeTLS struct {
	Server  *tls.Config    // client and admin ports: TLS 1.3, client certificates verified when given
	Peer    *tls.Config    // dialling other nodes' client ports with the node certificate
	PeerCAs *x509.CertPool // a client certificate that verifies against these is a node
}

// Load reads the files and builds the node's TLS configs.
func (f TLSFiles) Load() (*NodeTLS, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("auth: node certificate: %w", err)
	}
	nodeCAs, err := loadPool(f.CA)
	if err != nil {
		return nil, err
	}
	clientCAs, err := loadPool(f.CA) // nodes are clients too (forwarding connections)
	if err != nil {
		return nil, err
	}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("auth: client CA: %w", err)
		}
		if !clientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("auth: no certificate in %s", f.ClientCA)
		}
	}
	return &NodeTLS{
		Server: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{cert},
			ClientCAs:    clientCAs,
			ClientAuth:   tls.VerifyClientCertIfGiven,
		},
		Peer: &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{cert},
			RootCAs:      nodeCAs,
		},
		PeerCAs: nodeCAs,
	}, nil
}

// LiveTLS is a node's TLS material that can be read again from its files
// (`warden serve` and `warden router` do on SIGHUP): listeners built with
// ServerConfig and dialers using Current take the newest material for every
// new connection; established connections keep what they handshook with.
type LiveTLS struct {
	files TLSFiles
	cur   atomic.Pointer[NodeTLS]
}

// Live loads the files and returns material that Reload can refresh.
func (f TLSFiles) Live() (*LiveTLS, error) {
	nt, err := f.Load()
	if err != nil {
		return nil, err
	}
	l := &LiveTLS{files: f}
	l.cur.Store(nt)
	return l, nil
}

// Reload reads the files again. On any error (a missing or unreadable
// file, a key that does not match its certificate, a CA file without a
// certificate) the material in use is kept and the error returned.
func (l *LiveTLS) Reload() error {
	nt, err := l.files.Load()
	if err != nil {
		return err
	}
	l.cur.Store(nt)
	return nil
}

// Current is the material in use.
func (l *LiveTLS) Current() *NodeTLS { return l.cur.Load() }

// ServerConfig is a listener's config that hands every handshake the
// current server config (certificate, client CAs).
func (l *LiveTLS) ServerConfig() *tls.Config {
	cfg := l.Current().Server.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return l.Current().Server, nil }
	return cfg
}

// ClientConfig builds a client's TLS config: servers are verified with the
// CA file; certFile/keyFile (optional) are the client's own certificate.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("auth: give both a client certificate and its key, or neither")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("auth: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("auth: no certificate in %s", path)
	}
	return pool, nil
}

// IdentityFromCert is the identity a client certificate proves: its first
// URI SAN (e.g. spiffe://example.org/billing) if it has one, else its
// subject common name.
func IdentityFromCert(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	if len(c.URIs) > 0 {
		return c.URIs[0].String()
	}
	return c.Subject.CommonName
}

// IsNode reports whether a peer certificate chains to the node CA (and so
// belongs to another node of the cluster, not to a client).
func IsNode(c *x509.Certificate, intermediates []*x509.Certificate, nodeCAs *x509.CertPool) bool {
	if c == nil || nodeCAs == nil {
		return false
	}
	inter := x509.NewCertPool()
	for _, ic := range intermediates {
		inter.AddCert(ic)
	}
	_, err := c.Verify(x509.VerifyOptions{Roots: nodeCAs, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}
