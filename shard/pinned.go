package shard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wardenlock/warden/internal/atomicfile"
)

// A pinned setting is fixed when a data dir is created, because dragonboat
// cannot reopen the dir's Raft data with another value, and is recorded in
// a file of the data dir so that later starts need not repeat it.
type pinned struct {
	file     string             // under the data dir
	flag     string             // the flag that asks for it (error messages)
	legacy   string             // what a dir with Raft data but no record ran with
	def      string             // a new dir's value when none is asked for
	valid    func(string) error // checks a recorded value
	mismatch error              // wrapped when the dir's value is not the one asked for
}

// resolve says which value dataDir runs with: its record; legacy for a dir
// that has Raft data but no record; otherwise want (def if empty), which is
// then recorded. Asking for another value than the dir's is p.mismatch.
func (p pinned) resolve(dataDir, want string) (string, error) {
	path := filepath.Join(dataDir, p.file)
	have := ""
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		have = strings.TrimSpace(string(b))
		if err := p.valid(have); err != nil {
			return "", fmt.Errorf("shard: %s: %w", path, err)
		}
	case errors.Is(err, os.ErrNotExist):
		if des, _ := os.ReadDir(filepath.Join(dataDir, "raft")); len(des) > 0 {
			have = p.legacy
		}
	default:
		return "", err
	}
	if have != "" {
		if want != "" && want != have {
			return "", fmt.Errorf("%w: %s has %s %s, asked for %s (start with %s %s, or use a new data dir)",
				p.mismatch, dataDir, p.flag, have, want, p.flag, have)
		}
		return have, nil
	}
	if want == "" {
		want = p.def
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", err
	}
	if err := atomicfile.Write(path, []byte(want+"\n"), 0o644); err != nil {
		return "", err
	}
	return want, nil
}
