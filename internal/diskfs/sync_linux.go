package diskfs

import (
	"os"
	"syscall"
)

// fdatasync flushes a file's data (and its size) without other metadata.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
