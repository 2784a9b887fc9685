package admin_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
// the lock paths with their tokens and waiters, and every shard's leader.
func TestStatusPageInChromium(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		t.Skip("chromium is not installed: run `make browser-test`, which installs Debian's chromium package")
	}
	f := start(t)
	// Leaders may move (the host balances them) while the page renders: a
	// shard's row must show its leader from just before or just after.
	var before admin.Status
	getJSON(t, "http://"+f.admin[1]+"/v1/status", &before)
	url := "http://" + f.admin[1] + "/?prefix=/locks/billing"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+t.TempDir(), "--dump-dom", url)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	dom := string(out)

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
	}
}
