package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/wardenlock/warden/internal/linmodel"
)

// Result is the outcome of one scenario.
type Result struct {
	Name       string
	Seed       int64
	Nodes      int
	Bugs       []string
	Violations []string // promises broken: empty means passed
	Notes      []string // figures and counts
	Dir        string   // report folder when something failed
}

// Failed reports whether a promise was broken.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

func (r *Result) violate(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Summary is one paragraph for logs.
func (r *Result) Summary() string {
	var b strings.Builder
	status := "PASS"
	if r.Failed() {
		status = "FAIL"
	}
	fmt.Fprintf(&b, "%s %s (nodes=%d seed=%d bugs=%v)\n", status, r.Name, r.Nodes, r.Seed, r.Bugs)
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  VIOLATION: %s\n", v)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  %s\n", n)
	}
	if r.Dir != "" {
		fmt.Fprintf(&b, "  report: %s\n", r.Dir)
	}
	return b.String()
}

// checkRegister runs porcupine over the register history; on failure it
// writes the visualization to dir.
func checkRegister(r *Result, h *linmodel.History, log *EventLog, dir string, timeout time.Duration) {
	ops := h.Ops()
	model := linmodel.RegisterModel()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	switch res {
	case porcupine.Illegal:
		path := filepath.Join(dir, "register.html")
		os.MkdirAll(dir, 0o755)
		var anns []porcupine.Annotation
		for _, ev := range log.Events() {
			anns = append(anns, porcupine.Annotation{Tag: "harness", Start: int64(ev.At), End: int64(ev.At), Description: ev.What, Details: ev.What})
		}
		info.AddAnnotations(anns)
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			r.note("visualization failed: %v", err)
		}
		r.violate("lock register is not linearizable (%d operations): see %s", len(ops), path)
	case porcupine.Unknown:
		r.note("register: porcupine gave up after %v (%d operations): inconclusive", timeout, len(ops))
	default:
		r.note("register: linearizable (%d operations)", len(ops))
	}
}

// writeReport fills dir with what a failed run leaves behind: the seed,
// the result, the harness events, the histories and the node logs.
func writeReport(r *Result, dir string, c *Cluster, log *EventLog, histories map[string]any) {
	os.MkdirAll(dir, 0o755)
	r.Dir = dir
	os.WriteFile(filepath.Join(dir, "SEED"), []byte(fmt.Sprintf("%d\n", r.Seed)), 0o644)
	var ev strings.Builder
	for _, e := range log.Events() {
		fmt.Fprintf(&ev, "%10.3fs  %s\n", e.At.Seconds(), e.What)
	}
	os.WriteFile(filepath.Join(dir, "events.txt"), []byte(ev.String()), 0o644)
	for name, h := range histories {
		if b, err := json.MarshalIndent(h, "", " "); err == nil {
			os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644)
		}
	}
	if c != nil {
		for _, n := range c.Nodes {
			copyFile(n.LogPath, filepath.Join(dir, filepath.Base(n.LogPath)))
		}
	}
	info := fmt.Sprintf("go %s %s/%s\nreproduce: WARDEN_CHAOS_SEED=%d WARDEN_TEST_BUGS=%s go test ./chaos -run '%s'\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, r.Seed, strings.Join(r.Bugs, ","), r.Name)
	os.WriteFile(filepath.Join(dir, "RESULT.txt"), []byte(r.Summary()+"\n"+info), 0o644)
}

func copyFile(src, dst string) {
	in, err := os.Open(src)
	if err != nil {
		return
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return
	}
	defer out.Close()
	io.Copy(out, in)
}
