package shard

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestStepWorkersAreKeptPerDataDir(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(dir string)
		want    uint64 // asked for
		got     uint64 // resolved (0 = error)
		err     error
	}{
		{"new dir, default", nil, 0, DefaultStepWorkers, nil},
		{"new dir, four", nil, 4, 4, nil},
		{"dir from before the count was kept ran 2", func(d string) { mkRaft(t, d) }, 0, 2, nil},
		{"dir from before the count was kept takes 2", func(d string) { mkRaft(t, d) }, 2, 2, nil},
		{"dir from before the count was kept refuses 1", func(d string) { mkRaft(t, d) }, 1, 0, ErrStepWorkersMismatch},
		{"recorded count is kept", func(d string) { writeSW(t, d, "3\n"); mkRaft(t, d) }, 0, 3, nil},
		{"recorded count refuses another", func(d string) { writeSW(t, d, "1\n") }, 2, 0, ErrStepWorkersMismatch},
		{"recorded garbage", func(d string) { writeSW(t, d, "two\n") }, 0, 0, nil},
		{"recorded zero", func(d string) { writeSW(t, d, "0\n") }, 0, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.prepare != nil {
				c.prepare(dir)
			}
			got, err := resolveStepWorkers(dir, c.want)
			if c.got == 0 {
				if err == nil || (c.err != nil && !errors.Is(err, c.err)) {
					t.Fatalf("got %d, %v; want error %v", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.got {
				t.Fatalf("got %d, %v; want %d", got, err, c.got)
			}
			// The count is recorded (or was): asking again with 0 gives the same.
			again, err := resolveStepWorkers(dir, 0)
			if err != nil || again != c.got {
				t.Fatalf("second open: %d, %v", again, err)
			}
		})
	}
}

func writeSW(t *testing.T, dir, s string) {
	if err := os.WriteFile(filepath.Join(dir, stepWorkersPin.file), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkRaft(t *testing.T, dir string) {
	if err := os.MkdirAll(filepath.Join(dir, "raft", "host"), 0o755); err != nil {
		t.Fatal(err)
	}
}
