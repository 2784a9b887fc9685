package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/wardenlock/warden/control"
	"github.com/wardenlock/warden/internal/atomicfile"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/statemachine"
)

// Format is the manifest format this package writes and reads.
const Format = 1

// ManifestFile is the manifest's name inside a backup directory; it is
// written last, so a directory without it is an unfinished backup.
const ManifestFile = "manifest.json"

// TableFile holds the range table (msgpack).
const TableFile = "table.msgpack"

// DefaultFenceMargin is added to each shard's highest fencing token at
// restore: tokens issued by the old cluster after the backup was taken (up
// to 2^40 of them per shard, 127 days at 100,000 grants a second) stay
// below every token the restored cluster issues.
const DefaultFenceMargin uint64 = 1 << 40

// Manifest describes a backup.
type Manifest struct {
	Format         int       `json:"format"`
	Created        time.Time `json:"created"`
	Source         string    `json:"source,omitempty"`
	FenceMargin    uint64    `json:"fence_margin"`
	MinFenceFloor  uint64    `json:"min_fence_floor,omitempty"` // set by `warden restore --fence-floor`
	TableGen       uint64    `json:"table_gen"`
	NamespaceDepth int       `json:"namespace_depth"`
	Table          FileRef   `json:"table"`
	Shards         []Shard   `json:"shards"`
}

// FileRef names a file of the backup with its size and checksum.
type FileRef struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Shard is one data shard's dump and what it held.
type Shard struct {
	ID           uint64     `json:"id"`
	File         FileRef    `json:"file"`
	AppliedIndex uint64     `json:"applied_index"`
	Rev          uint64     `json:"revision"`
	Fence        uint64     `json:"fence"` // highest token issued (or the floor)
	RangeGen     uint64     `json:"range_gen"`
	Ranges       []RangeHex `json:"ranges"`
	Locks        int        `json:"locks"`
	Waiters      int        `json:"waiters"`
	Leases       int        `json:"leases"`
	KVs          int        `json:"kvs"`
	TakenAt      int64      `json:"taken_at_ms"` // the shard's replicated time at the dump
}

// RangeHex is a range with its binary keys in hex, for people reading the
// manifest (the table file is the authority).
type RangeHex struct {
	Start string `json:"start"`
	End   string `json:"end"`
	Gen   uint64 `json:"gen"`
}

// Floor is the fence floor a restore gives the shard (at least 1, so a
// restored shard is never mistaken for a new one).
func (m *Manifest) Floor(s Shard) uint64 {
	return max(s.Fence+m.FenceMargin, m.MinFenceFloor, 1)
}

func shardEntry(id uint64, d statemachine.Dump) Shard {
	st := d.Stats
	s := Shard{ID: id, AppliedIndex: st.Applied, Rev: st.Rev, Fence: st.Fence, Locks: st.Locks,
		Waiters: st.Waiters, Leases: st.Leases, KVs: st.KVs, TakenAt: st.LastTime}
	for _, r := range st.Ranges {
		s.RangeGen = max(s.RangeGen, r.Gen)
		s.Ranges = append(s.Ranges, RangeHex{Start: hex.EncodeToString([]byte(r.Start)), End: hex.EncodeToString([]byte(r.End)), Gen: r.Gen})
	}
	return s
}

// Backup is a loaded, verified backup.
type Backup struct {
	Manifest *Manifest
	Table    *placement.Table
	Dumps    map[uint64][]byte
}

// Load reads a backup directory and verifies every file against the
// manifest's sizes and checksums.
func Load(dir string) (*Backup, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("backup: %w (is %s a finished backup?)", err, dir)
	}
	m := &Manifest{}
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, fmt.Errorf("backup: manifest: %w", err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("backup: manifest format %d, this build reads %d", m.Format, Format)
	}
	b := &Backup{Manifest: m, Dumps: map[uint64][]byte{}}
	tb, err := readVerified(dir, m.Table)
	if err != nil {
		return nil, err
	}
	b.Table = &placement.Table{}
	if err := msgpack.Unmarshal(tb, b.Table); err != nil {
		return nil, fmt.Errorf("backup: table: %w", err)
	}
	if b.Table.Gen != m.TableGen {
		return nil, fmt.Errorf("backup: table generation %d, manifest says %d", b.Table.Gen, m.TableGen)
	}
	for _, s := range m.Shards {
		d, err := readVerified(dir, s.File)
		if err != nil {
			return nil, err
		}
		b.Dumps[s.ID] = d
	}
	return b, nil
}

func readVerified(dir string, f FileRef) ([]byte, error) {
	if f.Name == "" || filepath.Base(f.Name) != f.Name {
		return nil, fmt.Errorf("backup: bad file name %q in manifest", f.Name)
	}
	data, err := os.ReadFile(filepath.Join(dir, f.Name))
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if int64(len(data)) != f.Bytes {
		return nil, fmt.Errorf("backup: %s is %d bytes, manifest says %d", f.Name, len(data), f.Bytes)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != f.SHA256 {
		return nil, fmt.Errorf("backup: %s: checksum mismatch (file damaged?)", f.Name)
	}
	return data, nil
}

// Plan turns a backup into a restore plan for a node of the new cluster.
func (b *Backup) Plan(done func(refused []uint64)) *control.RestorePlan {
	p := &control.RestorePlan{Table: b.Table, Shards: map[uint64]control.ShardRestore{}, Done: done}
	for _, s := range b.Manifest.Shards {
		p.Shards[s.ID] = control.ShardRestore{Dump: b.Dumps[s.ID], Floor: b.Manifest.Floor(s)}
	}
	return p
}

// Copy writes the backup (with its possibly edited manifest) into dir,
// which must not exist yet or be empty.
func (b *Backup) Copy(dir string) error {
	if err := emptyDir(dir); err != nil {
		return err
	}
	tb, err := msgpack.Marshal(b.Table)
	if err != nil {
		return err
	}
	if err := writeFile(dir, b.Manifest.Table.Name, tb); err != nil {
		return err
	}
	for _, s := range b.Manifest.Shards {
		if err := writeFile(dir, s.File.Name, b.Dumps[s.ID]); err != nil {
			return err
		}
	}
	return writeManifest(dir, b.Manifest)
}

func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("backup: %s is not empty", dir)
	}
	return nil
}

// writeFile writes and fsyncs one file.
func writeFile(dir, name string, data []byte) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: write %s: %w", name, err)
	}
	return nil
}

// writeManifest writes the manifest through a temporary file and a rename,
// then syncs the directory: a crash leaves no manifest or a whole one.
func writeManifest(dir string, m *Manifest) error {
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, ManifestFile), append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("backup: write manifest: %w", err)
	}
	return nil
}

func fileRef(name string, data []byte) FileRef {
	sum := sha256.Sum256(data)
	return FileRef{Name: name, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
}

// ErrIncomplete means the shards' dumps name range generations newer than
// the table read after them: the table kept changing during the backup.
var ErrIncomplete = errors.New("backup: the range table changed during the backup; try again")

func sortShards(s []Shard) { sort.Slice(s, func(i, j int) bool { return s[i].ID < s[j].ID }) }

func clearDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
