package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/internal/testbugs"
)

func testEnv(t *testing.T) Env {
	seed := time.Now().UnixNano() % 1_000_000
	if s := os.Getenv("WARDEN_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	dir := os.Getenv("WARDEN_CHAOS_REPORTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "warden-chaos-reports")
	}
	return Env{Binary: wardenBin, ReportDir: dir, Seed: seed, Out: testLogWriter{t}}
}

// TestChaosShort is the short schedule: kill, partition and pause the
// leader under the lock register and the fenced lock-set.
func TestChaosShort(t *testing.T) {
	for _, sc := range ShortSchedule() {
		t.Run(sc.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			env := testEnv(t)
			if b := os.Getenv(testbugs.Env); b != "" {
				env.Bugs = strings.Split(b, ",")
			}
			r := Run(ctx, sc, env)
			t.Log(r.Summary())
			if r.Failed() {
				t.Fatalf("promises broken; report in %s", r.Dir)
			}
		})
	}
}

// TestBugSwitchesAreCaught shows the suite catches each deliberately broken
// promise: with the switch on, its scenario must report a violation.
func TestBugSwitchesAreCaught(t *testing.T) {
	for _, bug := range testbugs.Names {
		t.Run(bug, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			env := testEnv(t)
			env.Bugs = []string{bug}
			r := Run(ctx, BugScenario(bug), env)
			t.Log(r.Summary())
			if !r.Failed() {
				t.Fatalf("the suite did not catch %s", bug)
			}
		})
	}
}
