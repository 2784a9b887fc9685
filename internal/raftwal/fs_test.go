package raftwal

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/wardenlock/warden/internal/diskfs"
)

// noSpares is the disk, except that no zero-filled spare can be created:
// every rotation onto a fresh file makes a growing segment, as when the
// filler lags or fails.
type noSpares struct{ diskfs.FS }

func (n noSpares) Create(name string, perm os.FileMode) (diskfs.File, error) {
	if filepath.Base(name) == spareName {
		return nil, errors.New("no spares in this test")
	}
	return n.FS.Create(name, perm)
}

// listSegments lists the segment numbers in dir, on the disk.
func listSegments(dir string) ([]uint64, error) {
	return (&WAL{dir: dir, fs: diskfs.Disk}).listSegments()
}

// sectorSize is the unit a disk writes whole (or not at all): tests tear
// writes at sector boundaries.
const sectorSize = 512
