//go:build !linux

package diskfs

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
