package repocheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoReferencesToEpisodesOrMissingFiles: docs, comments, test names,
// report strings and file names describe Warden as it is, and cite only
// files that exist.
func TestNoReferencesToEpisodesOrMissingFiles(t *testing.T) {
	found, err := CheckReferences(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// TestReferenceCheckCatchesAPlantedReference plants each kind of reference
// in a scratch tree and expects the check to name every one, and nothing in
// the clean file beside them.
func TestReferenceCheckCatchesAPlantedReference(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/bench/peers.md", "# Warden and its peers\n")
	write("docs/guide.md", "# Guide\n\nSee [the peers](bench/peers.md) and [performance](performance.md#top).\n\n## Update (19:14–20:40 UTC)\n")
	write("pkg/lease.go", `package pkg

// lease keeps the checkpoint (session 12, docs/bench/lease-run.md): see
// shard/lessor.go and DESIGN promise 3.
func lease() string { return "Goals (issue 6)" }

// TestSession4Stall is a test named after an episode.
func clean() string { return "docs/bench/lease-run.md in a string is not a comment" }
`)
	write("docs/bench/ab-session7.md", "figures\n")
	write("pkg/clean.go", "package pkg\n\n// clean describes the code as it is (docs/guide.md, docs/bench/peers.md).\nfunc other() {}\n")

	found, err := CheckReferences(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, f.String())
	}
	all := strings.Join(got, "\n")
	t.Log("\n" + all)
	for _, want := range []string{
		`docs/guide.md:3: links to performance.md, which does not exist`,
		`docs/guide.md:5: "## Update (19:14–20:40 UTC" names a dated episode header`,
		`pkg/lease.go:3: "session 12" names a development session`,
		`pkg/lease.go:3: names docs/bench/lease-run.md, which does not exist`,
		`pkg/lease.go:4: names shard/lessor.go, which does not exist`,
		`pkg/lease.go:4: "promise 3" names a numbered design promise`,
		`pkg/lease.go:5: "issue 6" names a tracker issue`,
		`pkg/lease.go:7: "Session4" names a development session`,
		`docs/bench/ab-session7.md:0: file name names a development session`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the check missed: %s", want)
		}
	}
	for _, f := range found {
		if f.File == "pkg/clean.go" || strings.Contains(f.What, "bench/peers.md") || strings.Contains(f.What, "in a string") {
			t.Errorf("the check reports a reference that is fine: %s", f)
		}
	}
}
