package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenlock/warden/node/nodetest"
)

// These tests run the real binary: three `warden serve` processes on
// 127.0.0.1 and the CLI verbs against them.

var wardenBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "warden-cli-test")
	if err != nil {
		panic(err)
	}
	wardenBin = filepath.Join(dir, "warden")
	build := exec.Command("go", "build", "-o", wardenBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type procCluster struct {
	t         *testing.T
	endpoints string
	procs     []*exec.Cmd
}

func startServers(t *testing.T) *procCluster {
	t.Helper()
	addrs := nodetest.FreePorts(t, 6)
	var members []string
	for i := 0; i < 3; i++ {
		members = append(members, fmt.Sprintf("%d=%s", i+1, addrs[3+i]))
	}
	pc := &procCluster{t: t, endpoints: strings.Join(addrs[:3], ",")}
	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		cmd := exec.Command(wardenBin, "serve", "--id", strconv.Itoa(i+1),
			"--data-dir", filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			"--listen", addrs[i], "--raft", addrs[3+i], "--members", strings.Join(members, ","), "--shards", "2", "--plaintext")
		logf, _ := os.Create(filepath.Join(dir, fmt.Sprintf("n%d.log", i+1)))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pc.procs = append(pc.procs, cmd)
	}
	t.Cleanup(pc.kill)
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _, code := pc.run(t, "status", "-o", "json")
		if code == 0 && ready(out) {
			return pc
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster of warden serve processes not ready: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func ready(statusJSON string) bool {
	var st struct {
		Nodes  []json.RawMessage `json:"nodes"`
		Shards []struct {
			Leader uint64 `json:"leader"`
		} `json:"shards"`
	}
	if json.Unmarshal([]byte(statusJSON), &st) != nil || len(st.Nodes) < 3 || len(st.Shards) == 0 {
		return false
	}
	for _, s := range st.Shards {
		if s.Leader == 0 {
			return false
		}
	}
	return true
}

func (pc *procCluster) kill() {
	for _, p := range pc.procs {
		if p.Process != nil {
			p.Process.Kill()
			p.Wait()
		}
	}
	pc.procs = nil
}

// run runs the CLI and returns stdout, stderr and the exit code.
func (pc *procCluster) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, wardenBin, append([]string{"--endpoints", pc.endpoints}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func TestCLIAgainstServeProcesses(t *testing.T) {
	pc := startServers(t)

	t.Run("lock runs the command with the token in its environment", func(t *testing.T) {
		out, errOut, code := pc.run(t, "lock", "/cli/jobs/nightly", "--", "sh", "-c", `echo "$WARDEN_LOCK_PATH $WARDEN_LOCK_TOKEN"`)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		f := strings.Fields(out)
		if len(f) != 2 || f[0] != "/cli/jobs/nightly" {
			t.Fatalf("child saw %q", out)
		}
		if tok, err := strconv.ParseUint(f[1], 10, 64); err != nil || tok == 0 {
			t.Fatalf("child saw token %q", f[1])
		}
	})
	t.Run("the command's exit code is passed through", func(t *testing.T) {
		if _, _, code := pc.run(t, "lock", "/cli/jobs/exit", "--", "sh", "-c", "exit 7"); code != 7 {
			t.Fatalf("exit %d, want 7", code)
		}
	})
	t.Run("try on a held lock exits 2; locks ls shows the holder", func(t *testing.T) {
		holder := exec.Command(wardenBin, "--endpoints", pc.endpoints, "lock", "/cli/jobs/held", "--", "sleep", "5")
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		defer holder.Wait()
		deadline := time.Now().Add(20 * time.Second)
		for {
			out, _, code := pc.run(t, "locks", "ls", "/cli/jobs", "-o", "json")
			if code == 0 && strings.Contains(out, "/cli/jobs/held") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("held lock never listed: %s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, _, code := pc.run(t, "lock", "--try", "/cli/jobs/held", "--", "true"); code != 2 {
			t.Fatalf("try on a held lock: exit %d, want 2", code)
		}
		if _, _, code := pc.run(t, "lock", "--try", "/cli/jobs/held/child", "--", "true"); code != 2 {
			t.Fatalf("try under a held lock: exit %d, want 2", code)
		}
	})
	t.Run("sem, lock-all, locks info and revoke", func(t *testing.T) {
		out, errOut, code := pc.run(t, "sem", "/cli/sem/pool", "2", "--", "sh", "-c", `echo "$WARDEN_LOCK_TOKEN"`)
		if tok, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64); code != 0 || err != nil || tok == 0 {
			t.Fatalf("sem: exit %d, child saw %q (%s)", code, out, errOut)
		}
		out, errOut, code = pc.run(t, "lock-all", "/cli/ma/x", "/cli/mb/y", "--", "sh", "-c", `echo "$WARDEN_LOCK_TOKENS"`)
		if code != 0 || !strings.Contains(out, "/cli/ma/x=") || !strings.Contains(out, "/cli/mb/y=") {
			t.Fatalf("lock-all: exit %d, child saw %q (%s)", code, out, errOut)
		}
		holder := exec.Command(wardenBin, "--endpoints", pc.endpoints, "lock", "--revocable", "/cli/rev/x", "--", "sleep", "30")
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { holder.Process.Kill(); holder.Wait() }()
		waitHeld(t, pc, "/cli/rev/x")
		if _, _, code := pc.run(t, "lock", "--try", "/cli/rev/x", "--", "true"); code != 2 {
			t.Fatalf("try on the held lock: exit %d, want 2", code)
		}
		if _, e, code := pc.run(t, "locks", "revoke", "/cli/rev/x", "--grace", "0"); code != 0 {
			t.Fatalf("revoke: exit %d: %s", code, e)
		}
		if _, e, code := pc.run(t, "lock", "--try", "/cli/rev/x", "--", "true"); code != 0 {
			t.Fatalf("try after the revocation: exit %d (%s), want 0", code, e)
		}
	})
	t.Run("kv", func(t *testing.T) {
		if _, e, code := pc.run(t, "kv", "put", "/cli/kv/a", "v1"); code != 0 {
			t.Fatalf("put: %d %s", code, e)
		}
		if out, _, code := pc.run(t, "kv", "get", "/cli/kv/a"); code != 0 || strings.TrimSpace(out) != "v1" {
			t.Fatalf("get: %d %q", code, out)
		}
		if _, _, code := pc.run(t, "kv", "put", "--expect-version", "5", "/cli/kv/a", "v2"); code != 1 {
			t.Fatalf("CAS with a wrong version: exit %d, want 1", code)
		}
		if _, _, code := pc.run(t, "kv", "get", "/cli/kv/missing"); code != 4 {
			t.Fatalf("get of a missing key: exit %d, want 4", code)
		}
	})
	t.Run("the command is stopped when the lease is lost", func(t *testing.T) {
		holder := exec.Command(wardenBin, "--endpoints", pc.endpoints, "lock", "--ttl", "2s", "--grace", "500ms",
			"/cli/jobs/doomed", "--", "sleep", "60")
		var stderr bytes.Buffer
		holder.Stderr = &stderr
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // holding
		pc.kill()                   // every server gone: no keepalive can be acknowledged
		done := make(chan error, 1)
		go func() { done <- holder.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 3 {
				t.Fatalf("want exit 3 after the lease was lost, got %v (%s)", err, stderr.String())
			}
		case <-time.After(20 * time.Second):
			holder.Process.Signal(syscall.SIGKILL)
			t.Fatal("the command kept running after the lease was lost")
		}
	})
}
