package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// `warden shards add` creates shard 4 and waits until it is active (with
// ranges moved in), `warden shards retire` retires shard 2 and waits until
// its replicas are gone; `warden shards` and `warden shards log` show the
// states and the decisions with their reasons; bad requests get typed
// errors and exit codes; a key written before is readable after.
func TestCLIShardsAddRetire(t *testing.T) {
	pc := startServers(t)
	if _, errOut, code := pc.run(t, "kv", "put", "/cli/shards/k", "before"); code != 0 {
		t.Fatalf("kv put: %s", errOut)
	}
	out, errOut, code := pc.run(t, "shards", "add", "--wait", "60s")
	if code != 0 || !strings.Contains(out, "shard 4 is active") {
		t.Fatalf("shards add: exit %d, %q %q", code, out, errOut)
	}
	waitShards(t, pc, "shard 4 holds ranges", func(_ cliStatus, shards []cliShard) error {
		for _, s := range shards {
			if s.ID == 4 && s.State == "active" && s.Ranges > 0 && s.Leader != 0 {
				return nil
			}
		}
		return fmt.Errorf("%+v", shards)
	})
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"shards", "retire", "9"}, exitNotFound, "no data shard 9"},
		{[]string{"shards", "retire", "1"}, 1, "meta group"},
		{[]string{"shards", "retire", "x"}, 1, "want a positive integer"},
		{[]string{"shards", "add", "--nodes", "1,1"}, 1, "named twice"},
		{[]string{"shards", "add", "--nodes", "9"}, exitNotFound, "not a cluster member"},
		{[]string{"shards", "add", "--nodes", "0"}, 1, "positive integers"},
	} {
		out, errOut, code := pc.run(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q %q; want exit %d naming %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
	out, errOut, code = pc.run(t, "shards", "retire", "2", "--wait", "60s")
	if code != 0 || !strings.Contains(out, "shard 2 is retired") {
		t.Fatalf("shards retire: exit %d, %q %q", code, out, errOut)
	}
	if _, errOut, code := pc.run(t, "shards", "retire", "2"); code == 0 || !strings.Contains(errOut, "already retired") {
		t.Fatalf("retire a retired shard: exit %d, %q", code, errOut)
	}
	out, errOut, code = pc.run(t, "shards")
	if code != 0 || !strings.Contains(out, "retired") || !strings.Contains(out, "operator: shard.retire") {
		t.Fatalf("shards: exit %d, %q %q", code, out, errOut)
	}
	out, errOut, code = pc.run(t, "shards", "log", "-o", "json")
	var log struct {
		Decisions []struct {
			Action string `json:"action"`
			Shard  uint64 `json:"shard"`
		} `json:"decisions"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &log) != nil {
		t.Fatalf("shards log: exit %d, %q %q", code, out, errOut)
	}
	var actions []string
	for _, d := range log.Decisions {
		actions = append(actions, fmt.Sprintf("%s %d", d.Action, d.Shard))
	}
	if got := strings.Join(actions, ", "); got != "create 4, activate 4, retire 2, stop 2" {
		t.Fatalf("decisions: %s", got)
	}
	// Retiring shard 3 now would leave no active shard.
	if _, errOut, code := pc.run(t, "shards", "retire", "3"); code != 0 {
		t.Fatalf("retire shard 3 (shard 4 stays): %s", errOut)
	}
	if _, errOut, code := pc.run(t, "shards", "retire", "4"); code == 0 || !strings.Contains(errOut, "last active shard") {
		t.Fatalf("retire the last active shard: exit %d, %q", code, errOut)
	}
	out, errOut, code = pc.run(t, "kv", "get", "/cli/shards/k")
	if code != 0 || !strings.Contains(out, "before") {
		t.Fatalf("kv get after the changes: %q %q exit %d", out, errOut, code)
	}
}
