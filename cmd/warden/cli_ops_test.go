package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/node/nodetest"
)

// opsCluster is three `warden serve` processes with admin ports, which can
// be killed and started again on the same addresses and data dirs.
type opsCluster struct {
	*procCluster
	dir    string
	addrs  []string // clients 0-2, raft 3-5, admin 6-8
	admins []string
}

func startOpsCluster(t *testing.T) *opsCluster {
	oc := &opsCluster{dir: t.TempDir(), addrs: nodetest.FreePorts(t, 9)}
	for i := 0; i < 3; i++ {
		oc.admins = append(oc.admins, "http://"+oc.addrs[6+i])
	}
	oc.procCluster = &procCluster{t: t, endpoints: strings.Join(oc.addrs[:3], ",")}
	t.Cleanup(func() { oc.kill() })
	oc.start(t)
	return oc
}

func (oc *opsCluster) dataDir(i int) string { return filepath.Join(oc.dir, fmt.Sprintf("n%d", i+1)) }

func (oc *opsCluster) start(t *testing.T) {
	t.Helper()
	var members []string
	for i := 0; i < 3; i++ {
		members = append(members, fmt.Sprintf("%d=%s", i+1, oc.addrs[3+i]))
	}
	for i := 0; i < 3; i++ {
		cmd := exec.Command(wardenBin, "serve", "--id", strconv.Itoa(i+1), "--data-dir", oc.dataDir(i),
			"--listen", oc.addrs[i], "--raft", oc.addrs[3+i], "--admin", oc.addrs[6+i],
			"--members", strings.Join(members, ","), "--shards", "2", "--plaintext")
		logf, _ := os.OpenFile(filepath.Join(oc.dir, fmt.Sprintf("n%d.log", i+1)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		oc.procs = append(oc.procs, cmd)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _, code := oc.run(t, "status", "-o", "json")
		if code == 0 && ready(out) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster of warden serve processes not ready: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (oc *opsCluster) must(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := oc.run(t, args...)
	if code != 0 {
		t.Fatalf("warden %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// TestSnapshotRestoreAndAuditProcesses: audit, snapshot save, wipe, restore
// and the token floor through the CLI against real processes.
func TestSnapshotRestoreAndAuditProcesses(t *testing.T) {
	oc := startOpsCluster(t)
	tokenOf := func() uint64 {
		out := oc.must(t, "lock", "/ops/jobs/nightly", "--", "sh", "-c", `echo "$WARDEN_LOCK_TOKEN"`)
		tok, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("token %q: %v", out, err)
		}
		return tok
	}
	before := tokenOf()
	oc.must(t, "kv", "put", "/ops/cfg/mode", "blue")

	// The audit trail of that lock, from a node that did not lead it.
	var ans struct {
		Records []struct {
			Kind, Cause, Path string
			Token             uint64
		}
	}
	out := oc.must(t, "audit", "/ops/jobs", "--admin", oc.admins[2], "--token", strconv.FormatUint(before, 10), "-o", "json")
	checkJSON(t, "audit", out, false)
	if err := json.Unmarshal([]byte(out), &ans); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range ans.Records {
		kinds = append(kinds, r.Kind+"/"+r.Cause)
	}
	if got := strings.Join(kinds, " "); !strings.Contains(got, "acquired/direct") || !strings.Contains(got, "released/released") {
		t.Fatalf("audit of token %d: %s", before, got)
	}
	if _, _, code := oc.run(t, "audit", "/nothing/here", "--admin", oc.admins[0]); code != exitNotFound {
		t.Fatalf("audit of an unknown prefix: exit %d, want %d", code, exitNotFound)
	}

	bk := filepath.Join(t.TempDir(), "bk")
	checkJSON(t, "snapshot save", oc.must(t, "snapshot", "save", bk, "--admin", oc.admins[0], "-o", "json"), false)
	after := tokenOf() // issued after the backup: must still be below the restored floor

	oc.kill()
	for i := 0; i < 3; i++ {
		if err := os.RemoveAll(oc.dataDir(i)); err != nil {
			t.Fatal(err)
		}
		checkJSON(t, "restore", oc.must(t, "restore", bk, "--data-dir", oc.dataDir(i), "-o", "json"), false)
	}
	oc.start(t)
	if got := strings.TrimSpace(oc.must(t, "kv", "get", "/ops/cfg/mode")); !strings.Contains(got, "blue") {
		t.Fatalf("kv after restore: %q", got)
	}
	if tok := tokenOf(); tok <= after || tok <= before {
		t.Fatalf("token after restore %d, tokens before: %d (backed up), %d (after the backup)", tok, before, after)
	}
}
