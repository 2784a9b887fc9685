// Package diskfs is the file-system interface the Raft log store
// (internal/raftwal) works through, and its implementation on the disk.
// Tests put a file system that can lose power in its place
// (internal/diskfs/crashfs).
//
// pebble's vfs.FS, which the audit store uses, does not fit the log store:
// at the pinned version its files have no positional writes, no data-only
// sync and no truncation, and an existing file opens read-only. This
// interface is the few operations the log store does, no more; there is no
// preallocation call (spares are zero-filled by writes, see
// internal/raftwal/prealloc.go), no mmap and no O_DIRECT.
package diskfs

import (
	"io"
	"os"
)

// FS names files by path; a directory's entries (files created, renamed,
// removed) are durable only once SyncDir on it has returned.
type FS interface {
	// Create makes a new, empty file for reading and writing; it fails if
	// name exists.
	Create(name string, perm os.FileMode) (File, error)
	// Open opens an existing file for reading and writing.
	Open(name string) (File, error)
	Remove(name string) error
	// Rename replaces newname (if it exists) by oldname, atomically.
	Rename(oldname, newname string) error
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names of a directory's entries.
	List(dir string) ([]string, error)
	// SyncDir makes the directory's entries durable.
	SyncDir(dir string) error
}

// File is an open file. Its data and size are durable only once SyncData
// has returned.
type File interface {
	io.ReaderAt
	io.WriterAt
	Size() (int64, error)
	Truncate(size int64) error
	// SyncData makes the file's data and size durable (fdatasync: not its
	// other metadata).
	SyncData() error
	Close() error
}

// Disk is the operating system's file system.
var Disk FS = disk{}

type disk struct{}

func (disk) Create(name string, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	return diskFile{f}, nil
}

func (disk) Open(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return diskFile{f}, nil
}

func (disk) Remove(name string) error                    { return os.Remove(name) }
func (disk) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (disk) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (disk) List(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(des))
	for i, de := range des {
		names[i] = de.Name()
	}
	return names, nil
}

func (disk) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

type diskFile struct{ *os.File }

func (f diskFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (f diskFile) SyncData() error { return fdatasync(f.File) }
