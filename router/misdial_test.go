package router_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/wire"
)

// serveRouter runs a standalone router (no seeds answer: the handshake and
// the door's checks need no cluster) on 127.0.0.1, with TLS when tc is set.
func serveRouter(t *testing.T, cfg router.Config, tc *tls.Config) string {
	t.Helper()
	if cfg.Seeds == nil {
		cfg.Seeds = []string{"127.0.0.1:1"}
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := router.New(cfg)
	ln, err := router.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

// devTLS makes a development PKI: the node's server config and a client
// config that trusts it.
func devTLS(t *testing.T) (server, cl *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	if err := (auth.DevCerts{Dir: dir}).Generate(); err != nil {
		t.Fatal(err)
	}
	nt, err := auth.DirFiles(dir).Load()
	if err != nil {
		t.Fatal(err)
	}
	cl, err = auth.ClientConfig(filepath.Join(dir, auth.CAFile), "", "")
	if err != nil {
		t.Fatal(err)
	}
	return nt.Server, cl
}

func dialClient(t *testing.T, addr string, opts ...client.Option) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{addr}, append(opts, client.WithDialTimeout(5*time.Second))...)
	if err == nil {
		c.Close()
	}
	return err
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHTTPToTheClientPortIsToldSo: an HTTP request to the client port (a
// curl aimed at the wrong port) gets a 400 that names the protocol and the
// admin port, not a frame-size error; so does one to a TLS client port in
// plaintext.
func TestHTTPToTheClientPortIsToldSo(t *testing.T) {
	code, body := httpGet(t, "http://"+serveRouter(t, router.Config{}, nil)+"/")
	if code != http.StatusBadRequest || !strings.Contains(body, "Warden client port") || !strings.Contains(body, "not HTTP") ||
		!strings.Contains(body, "admin port") {
		t.Fatalf("GET / on the client port: %d %q", code, body)
	}
	server, _ := devTLS(t)
	code, body = httpGet(t, "http://"+serveRouter(t, router.Config{}, server)+"/")
	if code != http.StatusBadRequest || !strings.Contains(body, "expects TLS") {
		t.Fatalf("plaintext GET / on a TLS client port: %d %q", code, body)
	}
}

// TestTLSMismatchIsNamed: a TLS client on a plaintext port, and a
// plaintext client on a TLS port, are told which one the port speaks.
func TestTLSMismatchIsNamed(t *testing.T) {
	server, cl := devTLS(t)
	err := dialClient(t, serveRouter(t, router.Config{}, nil), client.WithTLS(cl))
	if err == nil || !strings.Contains(err.Error(), "did not answer in TLS") {
		t.Fatalf("TLS client on a plaintext port: %v", err)
	}
	err = dialClient(t, serveRouter(t, router.Config{}, server))
	if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "this port expects TLS") {
		t.Fatalf("plaintext client on a TLS port: %v", err)
	}
	// The plaintext port's answer to a ClientHello is a Warden frame that
	// says so, in plaintext.
	raw, err := net.DialTimeout("tcp", serveRouter(t, router.Config{}, nil), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(5 * time.Second))
	raw.Write([]byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")) // a TLS 1.2/1.3 ClientHello's first bytes
	body, err := wire.ReadFrame(bufio.NewReader(raw), wire.DefaultMaxFrame, nil)
	var resp wire.Response
	if err != nil || wire.DecodeResponse(body, &resp) != nil || resp.Code != wire.InvalidArgument || !strings.Contains(resp.Msg, "not TLS") {
		t.Fatalf("the plaintext port answered a ClientHello with %+v (%v)", resp, err)
	}
}

// TestConnectionLimitRefusalReachesTheClient: a client refused by the
// per-address connection limit sees the server's reason (TooMany, "too
// many connections"), not a complaint about the refusal's frame id.
func TestConnectionLimitRefusalReachesTheClient(t *testing.T) {
	addr := serveRouter(t, router.Config{Security: router.Security{MaxConnsPerAddr: 1}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := client.New(ctx, []string{addr}, client.WithPoolSize(1))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	err = dialClient(t, addr)
	if !errors.Is(err, client.ErrTooMany) || !strings.Contains(err.Error(), "too many connections from 127.0.0.1 (limit 1)") {
		t.Fatalf("second client over a limit of one connection: %v", err)
	}
}
