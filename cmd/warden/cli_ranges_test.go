package main

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

type rangeRowJSON struct {
	Index  int    `json:"index"`
	Start  string `json:"start"`
	Shard  uint64 `json:"shard"`
	Moving string `json:"moving"`
}

func (pc *procCluster) ranges(t *testing.T) []rangeRowJSON {
	t.Helper()
	out, errOut, code := pc.run(t, "ranges", "-o", "json")
	if code != 0 {
		t.Fatalf("warden ranges: %d %s", code, errOut)
	}
	var rows []rangeRowJSON
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return rows
}

// TestCLIRangeSplitMoveMerge drives the range verbs against `warden serve`
// processes: a key written before the split and move is read back after.
func TestCLIRangeSplitMoveMerge(t *testing.T) {
	pc := startServers(t)
	if _, e, code := pc.run(t, "kv", "put", "/rng/a/x", "v1"); code != 0 {
		t.Fatalf("kv put: %s", e)
	}
	if _, e, code := pc.run(t, "range", "split", "/rng/a"); code != 0 {
		t.Fatalf("range split: %s", e)
	}
	start := hex.EncodeToString([]byte(wire.RouteKey("/rng/a")))
	find := func() (rangeRowJSON, []rangeRowJSON) {
		rows := pc.ranges(t)
		for _, r := range rows {
			if r.Start == start {
				return r, rows
			}
		}
		t.Fatalf("no range starts at %s: %+v", start, rows)
		return rangeRowJSON{}, nil
	}
	row, _ := find()
	to := uint64(2)
	if row.Shard == 2 {
		to = 3
	}
	out, e, code := pc.run(t, "range", "move", start, strconv.FormatUint(to, 10))
	if code != 0 || !strings.Contains(out, "started") {
		t.Fatalf("range move: %d %s %s", code, out, e)
	}
	deadline := time.Now().Add(60 * time.Second)
	for row, _ = find(); row.Shard != to || row.Moving != ""; row, _ = find() {
		if time.Now().After(deadline) {
			t.Fatalf("the move did not finish: %+v", row)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, _, code := pc.run(t, "kv", "get", "/rng/a/x"); code != 0 || strings.TrimSpace(out) != "v1" {
		t.Fatalf("kv get after the move: %d %q", code, out)
	}
	// Move it back and merge it with its neighbour on the same shard.
	back := uint64(5) - to
	if _, e, code := pc.run(t, "range", "move", strconv.Itoa(row.Index), strconv.FormatUint(back, 10)); code != 0 {
		t.Fatalf("range move back: %s", e)
	}
	var rows []rangeRowJSON
	for row, rows = find(); row.Shard != back || row.Moving != ""; row, rows = find() {
		if time.Now().After(deadline.Add(60 * time.Second)) {
			t.Fatalf("the move back did not finish: %+v", row)
		}
		time.Sleep(200 * time.Millisecond)
	}
	merged := false
	for i := 0; i+1 < len(rows); i++ {
		if rows[i].Shard == rows[i+1].Shard {
			if _, e, code := pc.run(t, "range", "merge", strconv.Itoa(i)); code != 0 {
				t.Fatalf("range merge: %s", e)
			}
			merged = true
			break
		}
	}
	if !merged {
		t.Fatalf("no neighbours on one shard to merge: %+v", rows)
	}
	if n := len(pc.ranges(t)); n != len(rows)-1 {
		t.Fatalf("%d ranges after the merge, want %d", n, len(rows)-1)
	}
	if out, _, code := pc.run(t, "kv", "get", "/rng/a/x"); code != 0 || strings.TrimSpace(out) != "v1" {
		t.Fatalf("kv get after the merge: %d %q", code, out)
	}
}
