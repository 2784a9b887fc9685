package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// DevCerts describes a development PKI for `warden certs`: a node CA and a
// client CA, one node certificate valid for 127.0.0.1, ::1, localhost and
// Hosts, and one client certificate per name in Clients (CN = the name; the
// first is also written as client.pem). Keys are ECDSA P-256.
type DevCerts struct {
	Dir      string
	Hosts    []string      // extra SANs for the node certificate (IPs or DNS names)
	Clients  []string      // client identities (default: "admin")
	Validity time.Duration // default one year
	Force    bool          // overwrite an existing CA
}

// Generate writes the files. Keys are written 0600.
func (d DevCerts) Generate() error {
	if d.Dir == "" {
		return errors.New("auth: certs: no directory")
	}
	if len(d.Clients) == 0 {
		d.Clients = []string{"admin"}
	}
	if d.Validity <= 0 {
		d.Validity = 365 * 24 * time.Hour
	}
	if _, err := os.Stat(filepath.Join(d.Dir, CAFile)); err == nil && !d.Force {
		return fmt.Errorf("auth: certs: %s already exists (use --force to replace the CA)", filepath.Join(d.Dir, CAFile))
	}
	if err := os.MkdirAll(d.Dir, 0o755); err != nil {
		return err
	}
	notAfter := time.Now().Add(d.Validity)
	ca, caKey, err := d.issue(pkix.Name{CommonName: "warden node CA"}, nil, nil, notAfter, caTemplate, CAFile, CAKeyFile)
	if err != nil {
		return err
	}
	clientCA, clientCAKey, err := d.issue(pkix.Name{CommonName: "warden client CA"}, nil, nil, notAfter, caTemplate, ClientCAFile, ClientCAKey)
	if err != nil {
		return err
	}
	node := func(t *x509.Certificate) {
		t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		t.DNSNames = []string{"localhost"}
		t.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		for _, h := range d.Hosts {
			if ip := net.ParseIP(h); ip != nil {
				t.IPAddresses = append(t.IPAddresses, ip)
			} else if h != "" {
				t.DNSNames = append(t.DNSNames, h)
			}
		}
	}
	if _, _, err := d.issue(pkix.Name{CommonName: "warden node"}, ca, caKey, notAfter, node, NodeCertFile, NodeKeyFile); err != nil {
		return err
	}
	client := func(t *x509.Certificate) { t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth} }
	for _, name := range d.Clients {
		certF, keyF := d.ClientFiles(name)
		if _, _, err := d.issue(pkix.Name{CommonName: name}, clientCA, clientCAKey, notAfter, client, filepath.Base(certF), filepath.Base(keyF)); err != nil {
			return err
		}
	}
	return nil
}

// ClientFiles are the certificate and key Generate writes for the client
// identity name, in Dir: client.pem and client-key.pem for the first of
// Clients (default "admin"), client-<name>.pem and client-<name>-key.pem
// for the others.
func (d DevCerts) ClientFiles(name string) (cert, key string) {
	first := "admin"
	if len(d.Clients) > 0 {
		first = d.Clients[0]
	}
	if name == first {
		return filepath.Join(d.Dir, ClientCert), filepath.Join(d.Dir, ClientKeyFile)
	}
	return filepath.Join(d.Dir, "client-"+name+".pem"), filepath.Join(d.Dir, "client-"+name+"-key.pem")
}

func caTemplate(t *x509.Certificate) {
	t.IsCA = true
	t.BasicConstraintsValid = true
	t.MaxPathLenZero = true
	t.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
}

// issue makes a key and a certificate signed by parent (self-signed when
// parent is nil) and writes both.
func (d DevCerts) issue(name pkix.Name, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, notAfter time.Time,
	shape func(*x509.Certificate), certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: name,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	shape(tmpl)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(filepath.Join(d.Dir, certFile), "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	if err := writePEM(filepath.Join(d.Dir, keyFile), "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode)
}
