package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// keyGone waits until `kv get key` answers not found (exit 4).
func keyGone(t *testing.T, pc *procCluster, what, key string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, code := pc.run(t, "kv", "get", key)
		if code == exitNotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s still there (exit %d): %s", what, key, code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// An ephemeral key lives exactly as long as the wrapper keeps its session:
// it goes when the command exits, when the wrapper is interrupted and when
// the session is lost (the command is then stopped, as under a lock).
func TestCLIEphemeralKeyLivesWithTheWrapper(t *testing.T) {
	pc := startServers(t)

	t.Run("until the command exits", func(t *testing.T) {
		const key = "/cli/services/api/n1"
		out, errOut, code := pc.run(t, "kv", "put", "--ephemeral", key, "10.0.0.5:8080", "--",
			"sh", "-c", `echo "env $WARDEN_KV_KEY $WARDEN_KV_VERSION $WARDEN_KV_LEASE"; `+wardenBin+` --endpoints `+pc.endpoints+` kv get `+key+`; exit 5`)
		if code != 5 {
			t.Fatalf("exit %d, want the command's 5: %s %s", code, out, errOut)
		}
		f := strings.Fields(out)
		if len(f) < 5 || f[0] != "env" || f[1] != key || f[2] != "1" || f[3] == "" || f[4] != "10.0.0.5:8080" {
			t.Fatalf("the command saw %q, want its key, version 1, a lease and the value", out)
		}
		keyGone(t, pc, "command exited", key)
	})

	t.Run("until interrupted", func(t *testing.T) {
		const key = "/cli/services/api/n2"
		w, out, done := startWrapper(t, pc, "kv", "put", "--ephemeral", "--expect-version", "0", key, "n2")
		deadline := time.Now().Add(30 * time.Second)
		for {
			o, _, code := pc.run(t, "kv", "get", key, "-o", "json")
			if code == 0 && strings.Contains(o, `"lease"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the key never appeared with a lease: %s (%s)", o, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, _, code := pc.run(t, "kv", "put", "--expect-version", "0", key, "other"); code == 0 {
			t.Fatal("compare-and-set on an existing ephemeral key succeeded")
		}
		w.Process.Signal(syscall.SIGINT)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("interrupted wrapper ended with %v, want exit 0 (%s)", err, out)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("the wrapper did not end on SIGINT (%s)", out)
		}
		if !strings.Contains(out.String(), "version=1 lease=") {
			t.Fatalf("the wrapper printed %q, want the version and lease", out)
		}
		keyGone(t, pc, "interrupted", key)
	})

	t.Run("until the session is lost", func(t *testing.T) {
		const key = "/cli/services/api/n3"
		lostWhileStopped(t, pc, "session lost", filepath.Join(t.TempDir(), "pid"),
			"kv", "put", "--ephemeral", "--ttl", "2s", "--grace", "1s", key, "n3")
		keyGone(t, pc, "session lost", key)
	})

	t.Run("bad use", func(t *testing.T) {
		for _, args := range [][]string{
			{"kv", "put", "/cli/services/x", "v", "--", "true"},                // a command without --ephemeral
			{"kv", "put", "--ttl", "5s", "/cli/services/x", "v"},               // --ttl without --ephemeral
			{"kv", "put", "--ephemeral", "/cli/services/x", "--", "true"},      // no value
			{"kv", "put", "--ephemeral", "--ttl", "0", "/cli/services/x", "v"}, // no TTL
		} {
			_, errOut, code := pc.run(t, args...)
			if code != exitFailure || errOut == "" {
				t.Errorf("%v: exit %d (%q), want %d with a message", args, code, errOut, exitFailure)
			}
		}
		keyGone(t, pc, "bad use", "/cli/services/x")
	})
}
