package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The CLI's -o json rules (output.go, docs/operations.md "The CLI's JSON"),
// checked on every document a verb prints: snake_case names, no unset time
// printed as year 1, times in RFC 3339, enum fields as names, lease and
// client ids as hex strings, values UTF-8 or marked base64.

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// checkJSON parses out (one document, or one per line when lines) and
// checks every object in it against the rules; it returns the documents.
func checkJSON(t *testing.T, verb, out string, lines bool) []any {
	t.Helper()
	var docs []any
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s -o json: %v in %q", verb, err, out)
		}
		docs = append(docs, v)
	}
	if len(docs) == 0 || !lines && len(docs) != 1 {
		t.Fatalf("%s -o json printed %d documents: %q", verb, len(docs), out)
	}
	if lines && strings.Count(strings.TrimSpace(out), "\n")+1 != len(docs) {
		t.Fatalf("%s -o json: not one object per line: %q", verb, out)
	}
	for _, d := range docs {
		checkValue(t, verb, "", d)
	}
	return docs
}

func checkValue(t *testing.T, verb, key string, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		if enc, ok := x["value_encoding"]; ok {
			if enc != "base64" {
				t.Errorf("%s: value_encoding %v", verb, enc)
			} else if _, err := base64.StdEncoding.DecodeString(fmt.Sprint(x["value"])); err != nil {
				t.Errorf("%s: value marked base64 is not: %v", verb, x["value"])
			}
		}
		for k, e := range x {
			if !snakeCase.MatchString(k) {
				t.Errorf("%s: field %q is not snake_case", verb, k)
			}
			checkValue(t, verb, k, e)
		}
	case []any:
		for _, e := range x {
			checkValue(t, verb, key, e)
		}
	case string:
		if strings.HasPrefix(x, "0001-01-01") {
			t.Errorf("%s: %s is an unset time, printed: %q", verb, key, x)
		}
		if key == "time" || key == "last_heard" || key == "created" || key == "lock_delay_until" || key == "revoke_at" {
			if _, err := time.Parse(time.RFC3339Nano, x); err != nil {
				t.Errorf("%s: %s %q is not RFC 3339", verb, key, x)
			}
		}
		if key == "lease" || key == "client" {
			if _, err := strconv.ParseUint(x, 16, 64); err != nil {
				t.Errorf("%s: %s %q is not a hex id", verb, key, x)
			}
		}
	case float64:
		switch key {
		case "lease", "client":
			t.Errorf("%s: %s is a number (%v), want a hex string", verb, key, x)
		case "kind", "cause", "mode", "state", "role":
			t.Errorf("%s: %s is a number (%v), want its name", verb, key, x)
		}
	}
}

func field(doc any, path ...string) any {
	for _, p := range path {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = m[p]
	}
	return doc
}

// background runs `warden <args>` until the test ends and returns its
// stdout, line by line.
func background(t *testing.T, pc *procCluster, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(wardenBin, append([]string{"--endpoints", pc.endpoints}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewReader(out)
}

// line reads one line from a background verb, failing after 30 s.
func line(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		s, _ := r.ReadString('\n')
		got <- s
	}()
	select {
	case s := <-got:
		if s == "" {
			t.Fatal("the verb ended without printing")
		}
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no line within 30 s")
		return ""
	}
}

// TestCLIJSONAndErrors runs every verb that talks to the client port with
// -o json against `warden serve` processes and checks each document against
// the rules, and the CLI's error lines and exit codes.
func TestCLIJSONAndErrors(t *testing.T) {
	pc := startServers(t)
	must := func(t *testing.T, args ...string) string {
		t.Helper()
		out, errOut, code := pc.run(t, args...)
		if code != 0 {
			t.Fatalf("warden %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	doc := func(t *testing.T, args ...string) any {
		t.Helper()
		return checkJSON(t, strings.Join(args, " "), must(t, append(args, "-o", "json")...), false)[0]
	}

	t.Run("version", func(t *testing.T) {
		d := doc(t, "version")
		if field(d, "version") == nil || field(d, "go_version") == nil {
			t.Fatalf("version: %v", d)
		}
	})
	t.Run("status names every node up, with its version", func(t *testing.T) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			d := doc(t, "status")
			up := 0
			for _, n := range field(d, "nodes").([]any) {
				if field(n, "state") == "up" && field(n, "version") != nil {
					up++
				}
			}
			if up == 3 && field(d, "version") != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("status: %v", d)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	t.Run("kv", func(t *testing.T) {
		d := doc(t, "kv", "put", "/cli/json/a", "v1")
		if field(d, "key") != "/cli/json/a" || field(d, "version") != 1.0 {
			t.Fatalf("kv put: %v", d)
		}
		d = doc(t, "kv", "get", "/cli/json/a")
		if field(d, "value") != "v1" || field(d, "value_encoding") != nil || field(d, "mod_revision") == nil {
			t.Fatalf("kv get: %v", d)
		}
		doc(t, "kv", "put", "/cli/json/bin", "\xff\xfeok")
		d = doc(t, "kv", "get", "/cli/json/bin")
		if field(d, "value") != base64.StdEncoding.EncodeToString([]byte("\xff\xfeok")) || field(d, "value_encoding") != "base64" {
			t.Fatalf("kv get of a value that is not UTF-8: %v", d)
		}
		if l := doc(t, "kv", "ls", "/cli/json").([]any); len(l) != 2 {
			t.Fatalf("kv ls: %v", l)
		}
		if d := doc(t, "kv", "del", "/cli/json/bin"); field(d, "deleted") != true {
			t.Fatalf("kv del: %v", d)
		}
	})
	t.Run("one error prefix; a CAS mismatch exits 1", func(t *testing.T) {
		_, errOut, code := pc.run(t, "kv", "put", "--expect-version", "5", "/cli/json/a", "v2")
		if code != exitFailure || !strings.HasPrefix(errOut, "warden: version mismatch") || strings.Contains(errOut, "warden: warden:") {
			t.Fatalf("exit %d, stderr %q; want exit 1 and one prefix", code, errOut)
		}
	})
	t.Run("locks, holders and waiters", func(t *testing.T) {
		_, held := background(t, pc, "lock", "-o", "json", "--owner", "worker-a", "/cli/json/held")
		h := checkJSON(t, "lock", line(t, held), true)[0]
		if field(h, "path") != "/cli/json/held" || field(h, "mode") != "exclusive" || field(h, "token") == nil {
			t.Fatalf("lock: %v", h)
		}
		background(t, pc, "lock", "--owner", "worker-b", "/cli/json/held")
		var info any
		deadline := time.Now().Add(30 * time.Second)
		for {
			info = doc(t, "locks", "info", "/cli/json/held")
			if w, _ := field(info, "waiters").([]any); len(w) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("locks info: no waiter in %v", info)
			}
			time.Sleep(100 * time.Millisecond)
		}
		holders := field(info, "holders").([]any)
		if owner, _ := field(holders[0], "owner").(string); len(holders) != 1 || field(holders[0], "lease") != field(h, "lease") ||
			!strings.HasPrefix(owner, "worker-a") {
			t.Fatalf("locks info: %v (lock printed %v)", info, h)
		}
		rows := doc(t, "locks", "ls", "/cli/json").([]any)
		if len(rows) != 1 || field(rows[0], "waiters") != 1.0 || field(rows[0], "lease") != field(h, "lease") {
			t.Fatalf("locks ls: %v", rows)
		}
		// The table shows the same hex lease id.
		if out := must(t, "locks", "ls", "/cli/json"); !strings.Contains(out, field(h, "lease").(string)) {
			t.Fatalf("locks ls table does not show lease %v:\n%s", field(h, "lease"), out)
		}
	})
	t.Run("watch", func(t *testing.T) {
		_, w := background(t, pc, "watch", "-o", "json", "--prefix", "/cli/json/w")
		time.Sleep(time.Second) // the watch is registered before the put
		must(t, "kv", "put", "/cli/json/w/x", "hello")
		ev := checkJSON(t, "watch", line(t, w), true)[0]
		if field(ev, "kind") != "put" || field(ev, "path") != "/cli/json/w/x" || field(ev, "value") != "hello" ||
			!strings.Contains(fmt.Sprint(field(ev, "position")), ":") {
			t.Fatalf("watch event: %v", ev)
		}
	})
	t.Run("watch --prefix across shards resumes from a printed position", func(t *testing.T) {
		// /cli/pos is shallower than the namespace depth: its subtree is on
		// both shards.
		first, w := background(t, pc, "watch", "-o", "json", "--prefix", "/cli/pos")
		stop := make(chan struct{})
		warmed := make(chan struct{})
		go func() { // puts until the watch prints one
			defer close(warmed)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				pc.run(t, "kv", "put", fmt.Sprintf("/cli/pos/warm%d/k", i), "x")
			}
		}()
		ev := checkJSON(t, "watch", line(t, w), true)[0]
		close(stop)
		<-warmed
		first.Process.Kill()
		first.Wait()
		pos, _ := field(ev, "position").(string)
		if strings.Count(pos, ":") != 2 {
			t.Fatalf("first event %v: want a position naming both shards", ev)
		}
		must(t, "kv", "put", "/cli/pos/missed/k", "m")
		_, resumed := background(t, pc, "watch", "-o", "json", "--prefix", "/cli/pos", "--position", pos)
		for {
			next := checkJSON(t, "watch --position", line(t, resumed), true)[0]
			if field(next, "path") == field(ev, "path") && field(next, "revision") == field(ev, "revision") {
				t.Fatalf("resumed after %s, the event at it came again: %v", pos, next)
			}
			if field(next, "path") == "/cli/pos/missed/k" {
				break
			}
		}
		for _, bad := range [][]string{
			{"watch", "/cli/pos/a", "--position", pos},
			{"watch", "--prefix", "/cli/pos", "--position", "2:x"},
			{"watch", "--prefix", "/cli/pos", "--position", pos, "--rev", "3"},
		} {
			if _, errOut, code := pc.run(t, bad...); code != 1 || !strings.Contains(errOut, "--position") {
				t.Errorf("warden %s: exit %d, %q; want 1 naming --position", strings.Join(bad, " "), code, errOut)
			}
		}
	})
	t.Run("elect, observe, handover", func(t *testing.T) {
		_, a := background(t, pc, "elect", "-o", "json", "--owner", "a", "/cli/json/e", "node-a")
		e := checkJSON(t, "elect", line(t, a), true)[0]
		if field(e, "path") != "/cli/json/e" || field(e, "token") == nil || field(e, "lease") == nil {
			t.Fatalf("elect: %v", e)
		}
		_, obs := background(t, pc, "elect", "--observe", "-o", "json", "/cli/json/e")
		o := checkJSON(t, "elect --observe", line(t, obs), true)[0]
		if field(o, "value") != "node-a" || field(o, "owner") != "a" || field(o, "token") != field(e, "token") {
			t.Fatalf("elect --observe: %v (elected %v)", o, e)
		}
		background(t, pc, "elect", "--owner", "b", "/cli/json/e", "node-b")
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, errOut, code := pc.run(t, "elect", "handover", "/cli/json/e", "b", "-o", "json")
			if code == 0 {
				d := checkJSON(t, "elect handover", out, false)[0]
				if field(d, "action") != "handover" || field(d, "owner") != "b" {
					t.Fatalf("elect handover: %v", d)
				}
				break
			}
			if time.Now().After(deadline) { // b must be waiting first
				t.Fatalf("elect handover: exit %d: %s", code, errOut)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	t.Run("sem and lock-all", func(t *testing.T) {
		_, s := background(t, pc, "sem", "-o", "json", "/cli/json/pool", "2")
		if d := checkJSON(t, "sem", line(t, s), true)[0]; field(d, "path") != "/cli/json/pool" || field(d, "token") == nil {
			t.Fatalf("sem: %v", d)
		}
		_, m := background(t, pc, "lock-all", "-o", "json", "/cli/jm/x", "/cli/jn/y")
		d := checkJSON(t, "lock-all", line(t, m), true)[0]
		if locks, _ := field(d, "locks").([]any); len(locks) != 2 || field(locks[0], "token") == nil || field(d, "lease") == nil {
			t.Fatalf("lock-all: %v", d)
		}
	})
	t.Run("revoke", func(t *testing.T) {
		background(t, pc, "lock", "--revocable", "/cli/json/rev")
		waitHeld(t, pc, "/cli/json/rev")
		d := doc(t, "locks", "revoke", "/cli/json/rev", "--grace", "2s")
		if field(d, "action") != "revoke" || field(d, "grace_ms") != 2000.0 {
			t.Fatalf("locks revoke: %v", d)
		}
	})
	t.Run("lock-delay: --try exits 2 and says until when", func(t *testing.T) {
		holder, held := background(t, pc, "lock", "-o", "json", "--ttl", "1s", "--lock-delay", "60s", "/cli/json/delayed")
		line(t, held)
		holder.Process.Signal(syscall.SIGKILL) // its lease expires: the path enters lock-delay
		deadline := time.Now().Add(30 * time.Second)
		for {
			info := doc(t, "locks", "info", "/cli/json/delayed")
			if field(info, "lock_delay_until") != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no lock-delay after the holder's lease expired: %v", info)
			}
			time.Sleep(200 * time.Millisecond)
		}
		_, errOut, code := pc.run(t, "lock", "--try", "/cli/json/delayed", "--", "true")
		rfc3339 := regexp.MustCompile(`lock-delay until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(\d[^)]* left\)`)
		if code != exitConflict || !rfc3339.MatchString(errOut) {
			t.Fatalf("lock --try during lock-delay: exit %d, %q; want exit 2 and the end in RFC 3339", code, errOut)
		}
	})
	t.Run("ranges, range split and merge, shards", func(t *testing.T) {
		before := doc(t, "ranges").([]any)
		share := 0.0
		for _, r := range before {
			share += field(r, "share").(float64)
		}
		if share < 0.999 || share > 1.001 {
			t.Fatalf("ranges cover %v of the key space: %v", share, before)
		}
		d := doc(t, "range", "split", "/cli/jsonsplit")
		if field(d, "action") != "range split" || field(d, "path") != "/cli/jsonsplit" {
			t.Fatalf("range split: %v", d)
		}
		after := doc(t, "ranges").([]any)
		if len(after) != len(before)+1 {
			t.Fatalf("%d ranges after a split, %d before", len(after), len(before))
		}
		// Merge the range that now starts at the split point with the next.
		for i, r := range after {
			if i > 0 && field(r, "start") != "" && !containsStart(before, field(r, "start")) {
				d := doc(t, "range", "merge", strconv.Itoa(i-1))
				if field(d, "action") != "range merge" || field(d, "range") == nil {
					t.Fatalf("range merge: %v", d)
				}
				break
			}
		}
		shards := doc(t, "shards").([]any)
		if len(shards) == 0 || field(shards[0], "replicas") == nil {
			t.Fatalf("shards: %v", shards)
		}
	})
}

func containsStart(ranges []any, start any) bool {
	for _, r := range ranges {
		if field(r, "start") == start {
			return true
		}
	}
	return false
}
