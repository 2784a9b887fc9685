package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"

	"github.com/wardenlock/warden/node/nodetest"
)

// TestServeSendsTraces runs `warden serve --otlp-endpoint` against a fake
// OTLP/HTTP receiver: a lock taken through the node arrives as a span named
// after its op, with the shard's apply span, once the node shuts down (and
// flushes).
func TestServeSendsTraces(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			mu.Lock()
			bodies = append(bodies, b)
			mu.Unlock()
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()

	addrs := nodetest.FreePorts(t, 3)
	cmd := exec.Command(wardenBin, "serve", "--id", "1", "--data-dir", t.TempDir(), "--listen", addrs[0],
		"--raft", addrs[1], "--admin", addrs[2], "--shards", "1", "--otlp-endpoint", recv.URL, "--trace-ratio", "1", "--plaintext")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cl *client.Client
	var err error
	for cl == nil {
		if cl, err = client.New(ctx, []string{addrs[0]}); err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	l, err := cl.Acquire(ctx, "/traced/ns/job", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	cl.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()

	mu.Lock()
	defer mu.Unlock()
	all := bytes.Join(bodies, nil)
	for _, want := range []string{"acquire", "release", "/traced/ns/job", "warden", "shard.apply acquire"} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("exported spans lack %q (%d export requests)", want, len(bodies))
		}
	}
}
