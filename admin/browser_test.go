package admin_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/admin"
)

// chromiumPath finds Debian's chromium (or a compatible browser).
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestStatusPageInChromium loads the status page of a running cluster with
// known locks in headless Chromium and checks what the browser rendered:
// the lock paths with their tokens and waiters, every shard's leader, every
// node up; then, with one node stopped, that node down, and a screenshot of
// that page in the test's artifact directory (go test -artifacts keeps it).
func TestStatusPageInChromium(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("chromium is not installed: run `make browser-test`, which installs Debian's chromium package")
	}
	f := start(t)
	// The nodes hear from each other before the page is read. Leaders may
	// move (the host balances them) while the page renders: a shard's row
	// must show its leader from just before or just after.
	waitNodeStates(t, f.admin[1], map[uint64]string{1: "up", 2: "up", 3: "up"})
	var before admin.Status
	getJSON(t, "http://"+f.admin[1]+"/v1/status", &before)
	url := "http://" + f.admin[1] + "/?prefix=/locks/billing"
	dom := chromium(t, bin, "--dump-dom", url)

	if !strings.Contains(dom, "<title>Warden node 2</title>") {
		t.Fatalf("not the status page of node 2:\n%.2000s", dom)
	}
	for path, token := range f.held {
		row := regexp.MustCompile(`<tr class="lock"><td class="mono path">` + regexp.QuoteMeta(path) +
			`</td><td>exclusive</td><td class="num token">(\d+)</td><td>worker-a</td>`)
		m := row.FindStringSubmatch(dom)
		if m == nil {
			t.Errorf("the page shows no row for %s", path)
			continue
		}
		if m[1] != fmt.Sprint(token) {
			t.Errorf("%s shows token %s, want %d", path, m[1], token)
		}
	}
	if !strings.Contains(dom, "worker-b") {
		t.Errorf("the waiter queued on %s (worker-b) is not shown", f.waiter)
	}

	// Every shard row names the leader the node itself reports.
	var st admin.Status
	getJSON(t, "http://"+f.admin[1]+"/v1/status", &st)
	leaderBefore := map[uint64]uint64{}
	for _, sh := range before.Shards {
		leaderBefore[sh.ID] = sh.Leader
	}
	for _, sh := range st.Shards {
		re := regexp.MustCompile(fmt.Sprintf(`<tr data-shard="%d"><td>%d</td>\s*<td>node (\d+)`, sh.ID, sh.ID))
		m := re.FindStringSubmatch(dom)
		if m == nil {
			t.Errorf("shard %d: no leader shown", sh.ID)
			continue
		}
		if m[1] != fmt.Sprint(sh.Leader) && m[1] != fmt.Sprint(leaderBefore[sh.ID]) {
			t.Errorf("shard %d: page shows leader node %s, status says %d (before: %d)", sh.ID, m[1], sh.Leader, leaderBefore[sh.ID])
		}
	}
	for _, n := range st.Nodes {
		if !strings.Contains(dom, n.ClientAddr) {
			t.Errorf("node %d (%s) is not listed", n.ID, n.ClientAddr)
		}
		if got := nodeState(dom, n.ID); got != "up" {
			t.Errorf("node %d is shown %q, want up", n.ID, got)
		}
	}

	// Every node's CPU, as its status reports it.
	for id := 1; id <= 3; id++ {
		if got, want := nodeCPU(dom, id), fmt.Sprintf("%d%% of 2 cores", 10*id); got != want {
			t.Errorf("node %d's CPU is shown %q, want %q", id, got, want)
		}
	}

	// Node 3 stops: node 2's page shows it down (its client port refuses
	// connections), with the time it was last heard from, and its CPU as
	// not known.
	f.c.StopNode(2)
	waitNodeStates(t, f.admin[1], map[uint64]string{1: "up", 2: "up", 3: "down"})
	dom = chromium(t, bin, "--dump-dom", url)
	if got := nodeState(dom, 3); got != "down" {
		t.Errorf("the stopped node 3 is shown %q, want down", got)
	}
	if got := nodeState(dom, 1); got != "up" {
		t.Errorf("node 1 is shown %q, want up", got)
	}
	if got := nodeCPU(dom, 3); got != "–" {
		t.Errorf("the stopped node 3's CPU is shown %q, want –", got)
	}
	heard := regexp.MustCompile(`<tr data-node="3">(?s:.*?)<td class="heard">([^<]*)</td>`).FindStringSubmatch(dom)
	if heard == nil || !strings.HasSuffix(heard[1], "ago") && heard[1] != "just now" {
		t.Errorf("node 3's last heard: %q, want a time", heard)
	}
	shot := filepath.Join(t.ArtifactDir(), "status-node-down.png")
	chromium(t, bin, "--screenshot="+shot, "--window-size=1280,1400", url)
	if b, err := os.ReadFile(shot); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot of the page with node 3 down: %s", shot)
}

// chromium runs headless Chromium on url and returns what it printed.
func chromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// nodeState is the state the rendered page shows for node id.
func nodeState(dom string, id uint64) string {
	re := regexp.MustCompile(fmt.Sprintf(`<tr data-node="%d">(?s:.*?)<td class="state (?:ok|bad)"[^>]*>([a-z]+)</td>`, id))
	if m := re.FindStringSubmatch(dom); m != nil {
		return m[1]
	}
	return ""
}

// waitNodeStates waits until the node at adminAddr reports the given states.
func waitNodeStates(t *testing.T, adminAddr string, want map[uint64]string) {
	t.Helper()
	waitFor(t, func() bool {
		var st admin.Status
		getJSON(t, "http://"+adminAddr+"/v1/status", &st)
		for _, n := range st.Nodes {
			if w, ok := want[n.ID]; ok && n.State != w {
				return false
			}
		}
		return len(st.Nodes) == len(want)
	})
}

// nodeCPU is the CPU cell of node id's row.
func nodeCPU(dom string, id int) string {
	m := regexp.MustCompile(fmt.Sprintf(`<tr data-node="%d">(?s:.*?)<td class="num cpu">([^<]*)</td>`, id)).FindStringSubmatch(dom)
	if m == nil {
		return ""
	}
	return m[1]
}
