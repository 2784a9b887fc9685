package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A command run under a hold stops, with everything it started, when the
// hold ends for any reason; the wrapper exits 3 ("lost"). Each command here
// starts a grandchild (`sleep 30 &`) and writes its pid to a file: the
// grandchild must be gone too.

// heldCommand is `sh -c` that starts a grandchild, records its pid in
// pidFile, waits for it and then prints "finished".
func heldCommand(pidFile string) []string {
	return []string{"sh", "-c", `sleep 30 & echo $! > ` + pidFile + `; wait; echo finished`}
}

// startWrapper starts `warden <args>` in the background.
func startWrapper(t *testing.T, pc *procCluster, args ...string) (*exec.Cmd, *bytes.Buffer, <-chan error) {
	t.Helper()
	w := exec.Command(wardenBin, append([]string{"--endpoints", pc.endpoints}, args...)...)
	var out bytes.Buffer
	w.Stdout, w.Stderr = &out, &out
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Wait() }()
	t.Cleanup(func() {
		w.Process.Kill()
		select {
		case <-done:
		case <-time.After(5 * time.Second): // already waited for by the test
		}
	})
	return w, &out, done
}

// grandchild waits for the command to record its grandchild's pid.
func grandchild(t *testing.T, pidFile string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(pidFile)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started its grandchild")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie waiting for init does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no /proc: best effort
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// gone waits until pid has stopped running.
func gone(t *testing.T, what string, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the grandchild %d still runs", what, pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// exitsLost waits for the wrapper to exit with 3.
func exitsLost(t *testing.T, what string, done <-chan error, out *bytes.Buffer, within time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitLost {
			t.Fatalf("%s: wrapper ended with %v, want exit %d (%s)", what, err, exitLost, out)
		}
		if strings.Contains(out.String(), "finished") {
			t.Fatalf("%s: the command ran to its end: %s", what, out)
		}
	case <-time.After(within):
		t.Fatalf("%s: the wrapper did not stop its command (%s)", what, out)
	}
}

// lostWhileStopped starts `warden args... -- heldCommand` (args give the
// session a 2 s TTL), stops the wrapper for twice that so the service ends
// its lease, and checks that it then exits lost, its command's whole group
// stopped.
func lostWhileStopped(t *testing.T, pc *procCluster, what, pidFile string, args ...string) {
	t.Helper()
	w, out, done := startWrapper(t, pc, append(append(args, "--"), heldCommand(pidFile)...)...)
	pid := grandchild(t, pidFile)
	w.Process.Signal(syscall.SIGSTOP)
	time.Sleep(4 * time.Second) // twice the TTL: the lease expires in the service
	w.Process.Signal(syscall.SIGCONT)
	exitsLost(t, what, done, out, 20*time.Second)
	gone(t, what, pid, 5*time.Second)
}

func waitHeld(t *testing.T, pc *procCluster, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, code := pc.run(t, "locks", "info", path, "-o", "json")
		if info := lockInfoJSON(out); code == 0 && len(info.Holders) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held: %s", path, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lockInfoJSON reads `locks info -o json` (zero when it does not parse).
func lockInfoJSON(out string) (info struct {
	Holders []struct{ Token uint64 }
	Waiters []struct{ Owner string }
}) {
	json.Unmarshal([]byte(out), &info)
	return info
}

func TestCLIStopsTheCommandsGroupWhenTheHoldEnds(t *testing.T) {
	pc := startServers(t)
	dir := t.TempDir()

	for _, tc := range []struct{ name, path string }{
		{"revoked at the deadline", "/cli/report/deadline"},
		{"revoked by force", "/cli/report/force"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			_, out, done := startWrapper(t, pc, append([]string{"lock", "--revocable", "--grace", "1s", tc.path, "--"},
				heldCommand(pidFile)...)...)
			pid := grandchild(t, pidFile)
			waitHeld(t, pc, tc.path)
			args := []string{"locks", "revoke", tc.path, "--grace", "2s"}
			if tc.name == "revoked by force" {
				args = []string{"locks", "revoke", tc.path, "--force", "--grace", "0"}
			}
			if _, e, code := pc.run(t, args...); code != 0 {
				t.Fatalf("revoke: exit %d: %s", code, e)
			}
			exitsLost(t, tc.name, done, out, 20*time.Second)
			gone(t, tc.name, pid, 5*time.Second)
		})
	}

	t.Run("a leader handed over by an operator", func(t *testing.T) {
		const path = "/cli/elections/s2"
		pidFile := filepath.Join(dir, "elect-a")
		_, out, done := startWrapper(t, pc, append([]string{"elect", "--owner", "a", "--grace", "1s", path, "va", "--"},
			heldCommand(pidFile)...)...)
		pid := grandchild(t, pidFile)
		_, bOut, bDone := startWrapper(t, pc, "elect", "--owner", "b", path, "vb", "--", "sleep", "30")
		deadline := time.Now().Add(30 * time.Second)
		for {
			o, _, code := pc.run(t, "locks", "info", path, "-o", "json")
			if info := lockInfoJSON(o); code == 0 && len(info.Waiters) == 1 && info.Waiters[0].Owner == "b" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("b never queued: %s", o)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, e, code := pc.run(t, "elect", "handover", path, "b"); code != 0 {
			t.Fatalf("handover: exit %d: %s", code, e)
		}
		exitsLost(t, "hand-over", done, out, 20*time.Second)
		gone(t, "hand-over", pid, 5*time.Second)
		select {
		case err := <-bDone:
			t.Fatalf("the new leader's command ended: %v (%s)", err, bOut)
		default:
		}
	})

	t.Run("a session lost while the wrapper was stopped", func(t *testing.T) {
		lostWhileStopped(t, pc, "stopped wrapper", filepath.Join(dir, "stopped"),
			"lock", "--ttl", "2s", "--grace", "1s", "/cli/stopme/lock")
	})

	t.Run("a wrapper killed with SIGKILL", func(t *testing.T) {
		pidFile := filepath.Join(dir, "killed")
		w, _, _ := startWrapper(t, pc, append([]string{"lock", "--grace", "1s", "/cli/killed/lock", "--"},
			heldCommand(pidFile)...)...)
		pid := grandchild(t, pidFile)
		w.Process.Signal(syscall.SIGKILL)
		// Not waited for: the test's Wait ends only once everything that
		// shares the wrapper's output pipe, the grandchild too, has exited.
		gone(t, "killed wrapper", pid, 10*time.Second)
	})
}
