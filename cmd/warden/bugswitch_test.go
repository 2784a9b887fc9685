package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wardenlock/warden/internal/testbugs"
)

// A production build cannot contain a bug switch: built without the tag
// `bugs`, the binary holds neither the switches' environment variable nor
// the code that reads it, so nothing can turn one on. Built with the tag it
// holds both, which shows the check can fail.
func TestProductionBuildHasNoBugSwitch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	dir := t.TempDir()
	build := func(name string, tags ...string) []byte {
		out := filepath.Join(dir, name)
		args := append([]string{"build", "-o", out}, tags...)
		cmd := exec.Command("go", append(args, ".")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", tags, err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	marks := []string{testbugs.Env, "internal/testbugs.Parse"}
	prod := build("warden")
	for _, m := range marks {
		if bytes.Contains(prod, []byte(m)) {
			t.Errorf("the production binary contains %q", m)
		}
	}
	bugs := build("warden-bugs", "-tags", "bugs")
	for _, m := range marks {
		if !bytes.Contains(bugs, []byte(m)) {
			t.Errorf("the bugs build lacks %q: this check could not fail", m)
		}
	}
}
