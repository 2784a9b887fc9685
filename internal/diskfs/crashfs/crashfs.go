// Package crashfs is an in-memory file system that can lose power, for
// tests. It implements diskfs.FS (the Raft log store's) and, through VFS,
// pebble's vfs.FS (the audit store's) over the same files; it remembers
// what was synced and what happened since, and makes, at any operation,
// the image a power loss would leave (see Mode). A hook after every
// operation that changes something lets a test cut power at every one.
package crashfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wardenlock/warden/internal/diskfs"
)

// FS is the file system. Every method is safe for concurrent use.
type FS struct {
	mu   sync.Mutex
	root *inode
	ops  int

	hook func(Op) bool
	cut  func(Op, *State)

	frozen *sync.Cond // set while frozen: changes wait (see Freeze)
}

var _ diskfs.FS = (*FS)(nil)

// Op is one operation that changed the file system.
type Op struct {
	N    int    // operations so far, this one included
	Kind string // create, write, truncate, sync, remove, rename, mkdir, syncdir, link
	Name string
}

func (o Op) String() string { return fmt.Sprintf("#%d %s %s", o.N, o.Kind, o.Name) }

// inode is a file or a directory. A file's reads see data; synced is what
// its last sync made durable (never changed in place), pending the writes
// and truncations since, in order. A directory's lookups see entries;
// durable is what its last sync made durable, dirOps the changes since.
type inode struct {
	dir bool

	data    []byte
	synced  []byte
	pending []change

	entries map[string]*inode
	durable map[string]*inode
	dirOps  []dirOp
}

// change is a write (data at off) or, with trunc, a truncation to size.
type change struct {
	off   int64
	data  []byte
	trunc bool
	size  int64
}

// dirOp sets name to node, or removes name (node nil); a rename within
// one directory is one dirOp (from is removed as name is set).
type dirOp struct {
	name, from string
	node       *inode
}

func newDir() *inode {
	return &inode{dir: true, entries: map[string]*inode{}, durable: map[string]*inode{}}
}

// New returns an empty file system whose root directory is durable.
func New() *FS { return &FS{root: newDir()} }

// SetHook sets the function called after every operation that changes
// something, with the file system locked (it must not use the FS). When it
// returns true, the state as of that moment is captured and passed to cut,
// called next without the lock, in the same goroutine. Either may be nil.
func (f *FS) SetHook(hook func(Op) bool, cut func(Op, *State)) {
	f.mu.Lock()
	f.hook, f.cut = hook, cut
	f.mu.Unlock()
}

// Ops is the number of operations that changed something so far.
func (f *FS) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// Freeze captures the state as of now, and makes every later operation
// that would change something wait until Thaw: nothing the program does
// from now on becomes durable, and nothing it does next can claim it did.
// Reads go on.
func (f *FS) Freeze() *State {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen == nil {
		f.frozen = sync.NewCond(&f.mu)
	}
	return f.captureLocked()
}

// Thaw lets the operations Freeze held go on (into a state no image will
// be made of).
func (f *FS) Thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen != nil {
		f.frozen.Broadcast()
		f.frozen = nil
	}
}

// change runs fn, which changes the file system, with the lock held, then
// the hook.
func (f *FS) change(kind, name string, fn func() error) error {
	f.mu.Lock()
	for f.frozen != nil {
		f.frozen.Wait()
	}
	if err := fn(); err != nil {
		f.mu.Unlock()
		return err
	}
	f.ops++
	op := Op{N: f.ops, Kind: kind, Name: name}
	var st *State
	if f.hook != nil && f.hook(op) {
		st = f.captureLocked()
	}
	cut := f.cut
	f.mu.Unlock()
	if st != nil && cut != nil {
		cut(op, st)
	}
	return nil
}

func clean(name string) []string {
	p := strings.Trim(path.Clean("/"+name), "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func notExist(op, name string) error { return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist} }

// lookupLocked returns the inode at name.
func (f *FS) lookupLocked(op, name string) (*inode, error) {
	n := f.root
	for _, part := range clean(name) {
		if !n.dir {
			return nil, notExist(op, name)
		}
		if n = n.entries[part]; n == nil {
			return nil, notExist(op, name)
		}
	}
	return n, nil
}

// parentLocked returns the directory holding name, and the name in it.
func (f *FS) parentLocked(op, name string) (*inode, string, error) {
	parts := clean(name)
	if len(parts) == 0 {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	d, err := f.lookupLocked(op, strings.Join(parts[:len(parts)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !d.dir {
		return nil, "", notExist(op, name)
	}
	return d, parts[len(parts)-1], nil
}

func (d *inode) set(name string, n *inode) {
	d.entries[name] = n
	d.dirOps = append(d.dirOps, dirOp{name: name, node: n})
}

func (d *inode) remove(name string) {
	delete(d.entries, name)
	d.dirOps = append(d.dirOps, dirOp{name: name})
}

// Create implements diskfs.FS: a new file; an existing name is an error.
func (f *FS) Create(name string, _ os.FileMode) (diskfs.File, error) {
	var n *inode
	err := f.change("create", name, func() error {
		d, base, err := f.parentLocked("create", name)
		if err != nil {
			return err
		}
		if d.entries[base] != nil {
			return &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
		}
		n = &inode{}
		d.set(base, n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &file{fs: f, n: n, name: name}, nil
}

// Open implements diskfs.FS.
func (f *FS) Open(name string) (diskfs.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookupLocked("open", name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	return &file{fs: f, n: n, name: name}, nil
}

// Remove implements diskfs.FS; a directory must be empty.
func (f *FS) Remove(name string) error {
	return f.change("remove", name, func() error {
		d, base, err := f.parentLocked("remove", name)
		if err != nil {
			return err
		}
		n := d.entries[base]
		if n == nil {
			return notExist("remove", name)
		}
		if n.dir && len(n.entries) > 0 {
			return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrExist}
		}
		d.remove(base)
		return nil
	})
}

// Rename implements diskfs.FS.
func (f *FS) Rename(oldname, newname string) error {
	return f.change("rename", oldname+" → "+newname, func() error {
		od, ob, err := f.parentLocked("rename", oldname)
		if err != nil {
			return err
		}
		n := od.entries[ob]
		if n == nil {
			return notExist("rename", oldname)
		}
		nd, nb, err := f.parentLocked("rename", newname)
		if err != nil {
			return err
		}
		if od == nd {
			if ob == nb {
				return nil
			}
			delete(od.entries, ob)
			od.entries[nb] = n
			od.dirOps = append(od.dirOps, dirOp{name: nb, from: ob, node: n})
			return nil
		}
		nd.set(nb, n)
		od.remove(ob)
		return nil
	})
}

// MkdirAll implements diskfs.FS.
func (f *FS) MkdirAll(dir string, _ os.FileMode) error {
	return f.mkdirAll(dir)
}

func (f *FS) mkdirAll(dir string) error {
	made := false
	err := f.change("mkdir", dir, func() error {
		d := f.root
		for _, part := range clean(dir) {
			n := d.entries[part]
			if n == nil {
				n = newDir()
				d.set(part, n)
				made = true
			} else if !n.dir {
				return &fs.PathError{Op: "mkdir", Path: dir, Err: fs.ErrExist}
			}
			d = n
		}
		if !made {
			return errNothing
		}
		return nil
	})
	if err == errNothing {
		return nil
	}
	return err
}

// errNothing: the operation changed nothing (not counted).
var errNothing = fmt.Errorf("crashfs: nothing to do")

// MkdirAllSynced makes dir and its parents and syncs each of them and
// its parent: a directory that exists and is durable, as a data dir is
// before the program starts (test set-up).
func (f *FS) MkdirAllSynced(dir string) error {
	if err := f.mkdirAll(dir); err != nil {
		return err
	}
	parts := clean(dir)
	for i := len(parts); i >= 0; i-- {
		if err := f.SyncDir(strings.Join(parts[:i], "/")); err != nil {
			return err
		}
	}
	return nil
}

// List implements diskfs.FS.
func (f *FS) List(dir string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.lookupLocked("list", dir)
	if err != nil {
		return nil, err
	}
	if !d.dir {
		return nil, &fs.PathError{Op: "list", Path: dir, Err: fs.ErrInvalid}
	}
	names := make([]string, 0, len(d.entries))
	for name := range d.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// SyncDir implements diskfs.FS.
func (f *FS) SyncDir(dir string) error {
	return f.change("syncdir", dir, func() error {
		d, err := f.lookupLocked("syncdir", dir)
		if err != nil {
			return err
		}
		if !d.dir {
			return &fs.PathError{Op: "syncdir", Path: dir, Err: fs.ErrInvalid}
		}
		d.syncEntries()
		return nil
	})
}

// ReadFile returns a file's contents (tests).
func (f *FS) ReadFile(name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.lookupLocked("read", name)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), n.data...), nil
}

// String lists the files with their sizes, synced sizes and pending
// changes (debugging).
func (f *FS) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	var walk func(d *inode, at string)
	walk = func(d *inode, at string) {
		names := make([]string, 0, len(d.entries))
		for name := range d.entries {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			n := d.entries[name]
			p := at + "/" + name
			_, durable := d.durable[name]
			if n.dir {
				fmt.Fprintf(&b, "%s/ (durable %v, %d changes)\n", p, durable, len(n.dirOps))
				walk(n, p)
				continue
			}
			fmt.Fprintf(&b, "%s %d bytes, %d synced, %d pending (durable %v)\n", p, len(n.data), len(n.synced), len(n.pending), durable)
		}
	}
	walk(f.root, "")
	return b.String()
}

// file is an open file (diskfs.File).
type file struct {
	fs   *FS
	n    *inode
	name string
}

func (h *file) ReadAt(p []byte, off int64) (int, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	return h.n.readAt(p, off)
}

func (n *inode) readAt(p []byte, off int64) (int, error) {
	if off >= int64(len(n.data)) {
		return 0, io.EOF
	}
	c := copy(p, n.data[off:])
	if c < len(p) {
		return c, io.EOF
	}
	return c, nil
}

func (h *file) WriteAt(p []byte, off int64) (int, error) {
	err := h.fs.change("write", h.name, func() error {
		h.n.writeAt(p, off)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (n *inode) writeAt(p []byte, off int64) {
	n.data = apply(n.data, change{off: off, data: p})
	n.pending = append(n.pending, change{off: off, data: append([]byte(nil), p...)})
}

// apply makes a change to b (in place where it can).
func apply(b []byte, c change) []byte {
	if c.trunc {
		if c.size <= int64(len(b)) {
			return b[:c.size]
		}
		return append(b, make([]byte, c.size-int64(len(b)))...)
	}
	if end := c.off + int64(len(c.data)); end > int64(len(b)) {
		if end <= int64(cap(b)) {
			old := len(b)
			b = b[:end]
			clear(b[old:])
		} else {
			nb := make([]byte, end, end+end/4)
			copy(nb, b)
			b = nb
		}
	}
	copy(b[c.off:], c.data)
	return b
}

func (h *file) Size() (int64, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	return int64(len(h.n.data)), nil
}

func (h *file) Truncate(size int64) error {
	return h.fs.change("truncate", h.name, func() error {
		c := change{trunc: true, size: size}
		h.n.data = apply(h.n.data, c)
		h.n.pending = append(h.n.pending, c)
		return nil
	})
}

func (h *file) SyncData() error {
	return h.fs.change("sync", h.name, func() error {
		h.n.sync()
		return nil
	})
}

func (n *inode) sync() {
	n.synced = append([]byte(nil), n.data...)
	n.pending = nil
}

func (h *file) Close() error { return nil }

// fileInfo describes a file or a directory.
type fileInfo struct {
	name string
	size int64
	dir  bool
}

func (i fileInfo) Name() string { return i.name }
func (i fileInfo) Size() int64  { return i.size }
func (i fileInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.dir }
func (i fileInfo) Sys() any           { return nil }
