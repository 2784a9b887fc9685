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

// The machine verbs against real processes: a fourth `warden serve --join`
// process joins, `warden replica move` moves a replica onto it, `warden node
// drain` empties node 1, `warden node remove` takes it out, and `warden
// shards` shows each step; a lock taken before is still held at the end.
func TestCLIJoinMoveDrainRemove(t *testing.T) {
	pc := startServers(t)
	if _, errOut, code := pc.run(t, "kv", "put", "/cli/machines/k", "before"); code != 0 {
		t.Fatalf("kv put: %s", errOut)
	}
	addrs := nodetest.FreePorts(t, 2)
	dir := t.TempDir()
	four := exec.Command(wardenBin, "serve", "--id", "4", "--data-dir", filepath.Join(dir, "n4"),
		"--listen", addrs[0], "--raft", addrs[1], "--join", pc.endpoints, "--plaintext")
	logf, _ := os.Create(filepath.Join(dir, "n4.log"))
	four.Stdout, four.Stderr = logf, logf
	if err := four.Start(); err != nil {
		t.Fatal(err)
	}
	pc.procs = append(pc.procs, four)
	pc.endpoints += "," + addrs[0]

	waitShards(t, pc, "node 4 registered", func(st cliStatus, _ []cliShard) error {
		if len(st.Nodes) != 4 {
			return fmt.Errorf("%d nodes", len(st.Nodes))
		}
		return nil
	})
	if out, errOut, code := pc.run(t, "replica", "move", "2", "1", "4"); code != 0 {
		t.Fatalf("replica move: %s %s", out, errOut)
	}
	waitShards(t, pc, "shard 2 moved to node 4", func(_ cliStatus, shards []cliShard) error {
		for _, s := range shards {
			if s.ID == 2 && (s.Move != nil || !s.on(4) || s.on(1)) {
				return fmt.Errorf("shard 2: %+v", s)
			}
		}
		return nil
	})
	if _, errOut, code := pc.run(t, "node", "drain", "1"); code != 0 {
		t.Fatalf("node drain: %s", errOut)
	}
	waitShards(t, pc, "node 1 drained", func(_ cliStatus, shards []cliShard) error {
		for _, s := range shards {
			if s.Move != nil || s.on(1) || len(s.Replicas) != 3 || s.Leader == 0 {
				return fmt.Errorf("shard %d: %+v", s.ID, s)
			}
		}
		return nil
	})
	if out, errOut, code := pc.run(t, "node", "remove", "1"); code != 0 {
		t.Fatalf("node remove: %s %s", out, errOut)
	}
	pc.procs[0].Process.Kill()
	pc.procs[0].Wait()
	pc.endpoints = strings.Join(strings.Split(pc.endpoints, ",")[1:], ",")
	waitShards(t, pc, "node 1 gone", func(st cliStatus, _ []cliShard) error {
		if len(st.Nodes) != 3 {
			return fmt.Errorf("%d nodes", len(st.Nodes))
		}
		return nil
	})
	out, errOut, code := pc.run(t, "kv", "get", "/cli/machines/k")
	if code != 0 || !strings.Contains(out, "before") {
		t.Fatalf("kv get after the changes: %q %q exit %d", out, errOut, code)
	}
}

type cliStatus struct {
	Nodes []json.RawMessage `json:"nodes"`
}

type cliShard struct {
	ID       uint64 `json:"id"`
	Leader   uint64 `json:"leader"`
	Replicas []struct {
		Node uint64 `json:"node"`
		Role string `json:"role"`
	} `json:"replicas"`
	Move   *json.RawMessage `json:"move"`
	State  string           `json:"state"`
	Ranges int              `json:"ranges"`
}

func (s cliShard) on(node uint64) bool {
	for _, r := range s.Replicas {
		if r.Node == node {
			return true
		}
	}
	return false
}

func waitShards(t *testing.T, pc *procCluster, what string, cond func(cliStatus, []cliShard) error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := func() error {
			sOut, sErr, code := pc.run(t, "status", "-o", "json")
			if code != 0 {
				return fmt.Errorf("status: %s", sErr)
			}
			var st cliStatus
			if err := json.Unmarshal([]byte(sOut), &st); err != nil {
				return err
			}
			out, errOut, code := pc.run(t, "shards", "-o", "json")
			if code != 0 {
				return fmt.Errorf("shards: %s", errOut)
			}
			var shards []cliShard
			if err := json.Unmarshal([]byte(out), &shards); err != nil {
				return err
			}
			return cond(st, shards)
		}()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// `warden shards transfer` moves a shard's leadership to the named node and
// waits until `warden shards` shows it there; a node without a replica of
// the shard is refused.
func TestCLIShardsTransfer(t *testing.T) {
	pc := startServers(t)
	if out, errOut, code := pc.run(t, "shards", "transfer", "2", "7"); code == 0 || !strings.Contains(errOut, "no voting replica") {
		t.Fatalf("transfer to a node without a replica: exit %d, %q %q", code, out, errOut)
	}
	var leader uint64
	waitShards(t, pc, "shard 2 has a leader", func(_ cliStatus, shards []cliShard) error {
		for _, s := range shards {
			if s.ID == 2 && s.Leader != 0 {
				leader = s.Leader
				return nil
			}
		}
		return fmt.Errorf("shard 2 has no leader: %+v", shards)
	})
	to := leader%3 + 1
	// A transfer is best effort: the command says so when the target does
	// not lead in time, and an operator runs it again.
	var out, errOut string
	for attempt := 0; attempt < 5; attempt++ {
		var code int
		if out, errOut, code = pc.run(t, "shards", "transfer", "2", strconv.FormatUint(to, 10), "--wait", "20s"); code == 0 {
			break
		}
	}
	if want := fmt.Sprintf("shard 2: node %d leads it", to); !strings.Contains(out, want) {
		t.Fatalf("shards transfer 2 %d: %q %q, want %q", to, out, errOut, want)
	}
}
