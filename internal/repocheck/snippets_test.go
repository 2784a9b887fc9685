package repocheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// trimmedLines is text's lines without their indentation, blank lines left
// out: a block quoted in prose at another indentation still matches.
func trimmedLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func containsRun(hay, needle []string) bool {
	for i := 0; i+len(needle) <= len(hay); i++ {
		j := 0
		for j < len(needle) && hay[i+j] == needle[j] {
			j++
		}
		if j == len(needle) {
			return true
		}
	}
	return false
}

// TestGoBlocksAreQuotedFromExamples: every Go block of README.md and
// docs/*.md is a run of lines of a program under examples/, whose tests run
// it against a real cluster, so a block that no longer compiles or works
// fails there (or here, once the program and the block part).
func TestGoBlocksAreQuotedFromExamples(t *testing.T) {
	var programs [][]string
	err := filepath.WalkDir(filepath.Join(root, "examples"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		programs = append(programs, trimmedLines(string(b)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"))
	blocks := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goBlock.FindAllStringSubmatch(string(b), -1) {
			blocks++
			want := trimmedLines(m[1])
			quoted := false
			for _, p := range programs {
				if containsRun(p, want) {
					quoted = true
					break
				}
			}
			if !quoted {
				rel, _ := filepath.Rel(root, doc)
				t.Errorf("%s: this Go block is not a run of lines of any program under examples/ (edit the program and quote it again):\n%s", rel, m[1])
			}
		}
	}
	if blocks == 0 {
		t.Fatal("no Go blocks found in README.md and docs/: the search is broken")
	}
}

func TestContainsRun(t *testing.T) {
	hay := []string{"a", "b", "c", "d"}
	if !containsRun(hay, []string{"b", "c"}) || containsRun(hay, []string{"b", "d"}) || containsRun(hay, []string{"d", "e"}) {
		t.Fatal("containsRun is wrong")
	}
}
