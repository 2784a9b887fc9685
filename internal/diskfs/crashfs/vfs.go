package crashfs

import (
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/cockroachdb/pebble/vfs"
)

// VFS is the same file system seen as pebble's vfs.FS (the audit store's).
func (f *FS) VFS() vfs.FS { return vfsFS{f} }

type vfsFS struct{ f *FS }

var _ vfs.FS = vfsFS{}

// Create makes a new file, replacing any of that name (a new inode).
func (v vfsFS) Create(name string) (vfs.File, error) {
	var n *inode
	err := v.f.change("create", name, func() error {
		d, base, err := v.f.parentLocked("create", name)
		if err != nil {
			return err
		}
		n = &inode{}
		d.set(base, n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &vfsFile{file: file{fs: v.f, n: n, name: name}}, nil
}

func (v vfsFS) Link(oldname, newname string) error {
	return v.f.change("link", oldname+" → "+newname, func() error {
		n, err := v.f.lookupLocked("link", oldname)
		if err != nil {
			return err
		}
		d, base, err := v.f.parentLocked("link", newname)
		if err != nil {
			return err
		}
		if d.entries[base] != nil {
			return &fs.PathError{Op: "link", Path: newname, Err: fs.ErrExist}
		}
		d.set(base, n)
		return nil
	})
}

func (v vfsFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	v.f.mu.Lock()
	n, err := v.f.lookupLocked("open", name)
	v.f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	h := &vfsFile{file: file{fs: v.f, n: n, name: name}}
	for _, o := range opts {
		o.Apply(h)
	}
	return h, nil
}

func (v vfsFS) OpenDir(name string) (vfs.File, error) { return v.Open(name) }

func (v vfsFS) Remove(name string) error { return v.f.Remove(name) }

func (v vfsFS) RemoveAll(name string) error {
	err := v.f.change("remove", name, func() error {
		d, base, err := v.f.parentLocked("remove", name)
		if err != nil {
			return err
		}
		if d.entries[base] == nil {
			return errNothing
		}
		d.remove(base)
		return nil
	})
	if err == errNothing || err != nil && isNotExist(err) {
		return nil
	}
	return err
}

func isNotExist(err error) bool {
	pe, ok := err.(*fs.PathError)
	return ok && pe.Err == fs.ErrNotExist
}

func (v vfsFS) Rename(oldname, newname string) error { return v.f.Rename(oldname, newname) }

func (v vfsFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	if err := v.f.Rename(oldname, newname); err != nil {
		return nil, err
	}
	return v.Open(newname)
}

func (v vfsFS) MkdirAll(dir string, perm os.FileMode) error { return v.f.MkdirAll(dir, perm) }

// Lock creates the lock file; it excludes nothing (one process).
func (v vfsFS) Lock(name string) (io.Closer, error) {
	f, err := v.Create(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (v vfsFS) List(dir string) ([]string, error) { return v.f.List(dir) }

func (v vfsFS) Stat(name string) (os.FileInfo, error) {
	v.f.mu.Lock()
	defer v.f.mu.Unlock()
	n, err := v.f.lookupLocked("stat", name)
	if err != nil {
		return nil, err
	}
	return fileInfo{name: path.Base(name), size: int64(len(n.data)), dir: n.dir}, nil
}

func (vfsFS) PathBase(p string) string                   { return path.Base(p) }
func (vfsFS) PathJoin(elem ...string) string             { return path.Join(elem...) }
func (vfsFS) PathDir(p string) string                    { return path.Dir(p) }
func (vfsFS) GetDiskUsage(string) (vfs.DiskUsage, error) { return vfs.DiskUsage{}, vfs.ErrUnsupported }

// vfsFile is a file read and written at a position, or a directory
// opened to be synced.
type vfsFile struct {
	file
	rpos, wpos int64
}

func (h *vfsFile) Read(p []byte) (int, error) {
	n, err := h.ReadAt(p, h.rpos)
	h.rpos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (h *vfsFile) ReadAt(p []byte, off int64) (int, error) {
	if h.n.dir {
		return 0, &fs.PathError{Op: "read", Path: h.name, Err: fs.ErrInvalid}
	}
	return h.file.ReadAt(p, off)
}

func (h *vfsFile) Write(p []byte) (int, error) {
	n, err := h.WriteAt(p, h.wpos)
	h.wpos += int64(n)
	return n, err
}

func (h *vfsFile) Stat() (os.FileInfo, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	return fileInfo{name: path.Base(h.name), size: int64(len(h.n.data)), dir: h.n.dir}, nil
}

// Sync makes a file's data, or a directory's entries, durable.
func (h *vfsFile) Sync() error {
	if h.n.dir {
		return h.fs.change("syncdir", h.name, func() error {
			h.n.syncEntries()
			return nil
		})
	}
	return h.SyncData()
}

func (d *inode) syncEntries() {
	d.durable = make(map[string]*inode, len(d.entries))
	for k, v := range d.entries {
		d.durable[k] = v
	}
	d.dirOps = nil
}
