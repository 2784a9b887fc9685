package crashfs

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The power-loss tests' flags (go test ... -args -crash.seeds=20 ...); a
// zero (for points, a negative) value keeps the test's own default.
var (
	flagSeed     = flag.Int64("crash.seed", 0, "first seed of the power-loss workloads (0: from the clock)")
	flagSeeds    = flag.Int("crash.seeds", 0, "power-loss workloads, one per seed (0: the test's default)")
	flagSteps    = flag.Int("crash.steps", 0, "calls or entries of each power-loss workload (0: the test's default)")
	flagPoints   = flag.Int("crash.points", -1, "power cuts per workload, spread over its operations (0: after every one; negative: the test's default)")
	flagAllModes = flag.Bool("crash.allmodes", false, "check every mode at every power cut (else one mode per cut, in turn)")
)

// Plan is the size of a power-loss test.
type Plan struct {
	Seeds    int  // workloads, one per seed
	Steps    int  // calls or entries of each
	Points   int  // power cuts per workload (0: after every operation)
	AllModes bool // every mode at every cut
}

// Run runs a power-loss test: plan (its defaults, overridden by the flags)
// workloads with consecutive seeds, run(seed, plan) each returning how many
// images it checked and what failed. It fails the test at the first
// workload with a failure, naming its seed; what tells of what survived
// ends the log line of a passing run.
func Run(t testing.TB, plan Plan, what string, run func(seed int64, plan Plan) (checked int, failures []string)) {
	t.Helper()
	if *flagSeeds > 0 {
		plan.Seeds = *flagSeeds
	}
	if *flagSteps > 0 {
		plan.Steps = *flagSteps
	}
	if *flagPoints >= 0 {
		plan.Points = *flagPoints
	}
	plan.AllModes = plan.AllModes || *flagAllModes
	first := *flagSeed
	if first == 0 {
		first = time.Now().UnixNano() % 1e9
	}
	total := 0
	for i := range plan.Seeds {
		seed := first + int64(i)
		checked, failures := run(seed, plan)
		total += checked
		if len(failures) > 0 {
			t.Fatalf("%d of %d power-loss images failed (rerun: -crash.seed %d):\n%s", len(failures), checked, seed,
				strings.Join(failures[:min(len(failures), 10)], "\n"))
		}
		t.Logf("seed %d: %d power-loss images checked", seed, checked)
	}
	t.Log(fmt.Sprintf("%d power-loss images (operation × mode) of %d workloads (seeds %d..%d): %s",
		total, plan.Seeds, first, first+int64(plan.Seeds)-1, what))
}
