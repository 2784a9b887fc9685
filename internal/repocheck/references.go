package repocheck

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// A Finding is one line of the repository that refers to something a
// reader cannot follow: a development episode, a tracker number, or a file
// that does not exist.
type Finding struct {
	File string // relative to the root, slash-separated
	Line int
	What string
}

func (f Finding) String() string { return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.What) }

// episodes are the phrases that point at the project's history or at
// trackers outside the repository rather than at the code or the docs.
var episodes = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`(?i)\bsessions? \d{1,2}\b`), "a development session"},
	{regexp.MustCompile(`(?i)session\d+`), "a development session"},
	{regexp.MustCompile(`(?i)\bissues? #?\d+\b|\bissue-\d+\b`), "a tracker issue"},
	{regexp.MustCompile(`(?i)\bpromise \d+\b`), "a numbered design promise"},
	{regexp.MustCompile(`\b[A-Za-z][\w.-]*#\d{3,}\b`), "another project's tracker number"},
	{regexp.MustCompile(`(?i)\bsession \d+, round \d+`), "a development round"},
	{regexp.MustCompile(`(?m)^#+ .*\b\d{1,2}:\d{2}[–-]\d{1,2}:\d{2} UTC`), "a dated episode header"},
}

// selfTest is the check's own test file, which plants every kind of
// reference on purpose.
const selfTest = "internal/repocheck/references_test.go"

// pathLike finds file names with a directory and a known extension.
var pathLike = regexp.MustCompile(`(?:^|[\s(\x60"'\[,;=])((?:\.\.?/)*(?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_.-]+\.(?:go|md|txt|json|svg|yaml|yml|sh|py|html|pprof|patch|csv))\b`)

// mdLink finds the targets of markdown links and images.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// checked says which files the check reads: source, docs and scripts.
func checked(name string) bool {
	switch filepath.Ext(name) {
	case ".go", ".md", ".sh", ".py", ".yaml", ".yml", ".html", ".txt", ".toml":
		return true
	}
	return name == "Makefile" || name == "Dockerfile"
}

// skippedDir says which directories the walk leaves out: git's, build
// output, data, dependencies and fuzz corpora.
func skippedDir(rel, name string) bool {
	if rel == "." {
		return false
	}
	if strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules" || name == "__pycache__" {
		return true
	}
	switch rel {
	case "build", "bin", "data":
		return true
	}
	return false
}

// CheckReferences walks the repository at root and reports every
// development-episode phrase, tracker number and reference to a file that
// does not exist: in file names, in docs and scripts, and in Go comments,
// strings and identifiers (paths in Go code are checked in comments only).
func CheckReferences(root string) ([]Finding, error) {
	tops := map[string]bool{}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		tops[e.Name()] = true
	}
	var out []Finding
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skippedDir(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		for _, ep := range episodes {
			if ep.re.MatchString(d.Name()) {
				out = append(out, Finding{rel, 0, "file name names " + ep.what})
			}
		}
		if !checked(d.Name()) || strings.HasSuffix(d.Name(), ".json") || rel == selfTest {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(b)
		out = append(out, episodeFindings(rel, text)...)
		if strings.HasSuffix(rel, ".go") {
			for _, c := range goComments(b) {
				out = append(out, missingFiles(root, rel, c.text, c.line, tops, false)...)
			}
		} else {
			out = append(out, missingFiles(root, rel, text, 1, tops, strings.HasSuffix(rel, ".md"))...)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Line < out[j].Line
	})
	return out, err
}

func episodeFindings(rel, text string) []Finding {
	var out []Finding
	for _, ep := range episodes {
		for _, m := range ep.re.FindAllStringIndex(text, -1) {
			out = append(out, Finding{rel, lineOf(text, m[0]), fmt.Sprintf("%q names %s", strings.TrimSpace(text[m[0]:m[1]]), ep.what)})
		}
	}
	return out
}

// missingFiles reports the file names in text (starting at line first of
// rel) that name nothing in the repository. A name counts when it exists
// relative to the root or to rel's directory. Outside markdown links, only
// names whose first directory is one of the root's (or a relative "./",
// "../" name) are checked, so example paths such as a/b.txt in prose are
// not mistaken for references; a Go file's name is always checked.
func missingFiles(root, rel, text string, first int, tops map[string]bool, markdown bool) []Finding {
	var out []Finding
	dir := filepath.Dir(filepath.FromSlash(rel))
	exists := func(name string) bool {
		name = strings.TrimSuffix(name, "/")
		for _, base := range []string{root, filepath.Join(root, dir)} {
			if _, err := os.Stat(filepath.Join(base, filepath.FromSlash(name))); err == nil {
				return true
			}
		}
		return false
	}
	report := func(at int, name, how string) {
		out = append(out, Finding{rel, first + lineOf(text, at) - 1, fmt.Sprintf("%s %s, which does not exist", how, name)})
	}
	if markdown {
		for _, m := range mdLink.FindAllStringSubmatchIndex(text, -1) {
			target := text[m[2]:m[3]]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if target != "" && !exists(target) {
				report(m[2], target, "links to")
			}
		}
	}
	for _, m := range pathLike.FindAllStringSubmatchIndex(text, -1) {
		name := text[m[2]:m[3]]
		firstDir, _, _ := strings.Cut(strings.TrimLeft(name, "./"), "/")
		relative := strings.HasPrefix(name, "./") || strings.HasPrefix(name, "../")
		ext := filepath.Ext(name)
		if !relative && !tops[firstDir] && ext != ".go" && !(markdown && firstDir == "bench") {
			continue
		}
		if !relative && skippedDir(firstDir, firstDir) {
			continue // output a command writes (build/bench/…), not a file of the repository
		}
		if strings.ContainsAny(name, "*<>{}") || exists(name) {
			continue
		}
		report(m[2], name, "names")
	}
	return out
}

type comment struct {
	text string
	line int
}

// goComments returns the comments of a Go source file with their lines.
func goComments(src []byte) []comment {
	fset := token.NewFileSet()
	f := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(f, src, nil, scanner.ScanComments)
	var out []comment
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok == token.COMMENT {
			out = append(out, comment{lit, fset.Position(pos).Line})
		}
	}
}

func lineOf(text string, at int) int { return strings.Count(text[:at], "\n") + 1 }
