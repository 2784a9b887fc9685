package backup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// fixedSource serves a table and dumps from memory: the format's own tests
// (the cluster path is covered by node.TestBackupWipeRestore).
type fixedSource struct {
	table *placement.Table
	dumps map[uint64]statemachine.Dump
}

func (f fixedSource) Table(context.Context) (*placement.Table, error) { return f.table, nil }
func (f fixedSource) Dump(_ context.Context, id uint64) (statemachine.Dump, error) {
	return f.dumps[id], nil
}

func source() fixedSource {
	return fixedSource{
		table: &placement.Table{Gen: 3, NamespaceDepth: 2, Ranges: []wire.Range{{End: "\x80", Shard: 2, Gen: 3}, {Start: "\x80", Shard: 3, Gen: 2}},
			Shards: []placement.ShardInfo{{ID: 2, Replicas: []uint64{1}}, {ID: 3, Replicas: []uint64{1}}}},
		dumps: map[uint64]statemachine.Dump{
			2: {State: []byte("state of two"), Stats: statemachine.Stats{Fence: 40, Locks: 2, Ranges: []wire.Range{{End: "\x80", Shard: 2, Gen: 3}}}},
			3: {State: []byte("state of three"), Stats: statemachine.Stats{Fence: 0, Ranges: []wire.Range{{Start: "\x80", Shard: 3, Gen: 2}}}},
		},
	}
}

func TestSaveLoadPlan(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bk")
	m, err := Save(context.Background(), source(), dir, Options{FenceMargin: 1000})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b.Table.Gen != 3 || len(b.Dumps) != 2 || string(b.Dumps[3]) != "state of three" || m.Shards[0].Locks != 2 {
		t.Fatalf("loaded %+v", b)
	}
	p := b.Plan(nil)
	if p.Shards[2].Floor != 1040 || p.Shards[3].Floor != 1000 {
		t.Fatalf("floors %+v", p.Shards)
	}
	b.Manifest.FenceMargin, b.Manifest.MinFenceFloor = 0, 5000
	if p := b.Plan(nil); p.Shards[2].Floor != 5000 {
		t.Fatalf("min floor ignored: %+v", p.Shards)
	}
	b.Manifest.MinFenceFloor = 0
	if p := b.Plan(nil); p.Shards[3].Floor != 1 {
		t.Fatalf("a zero floor would look like a new shard: %+v", p.Shards[3])
	}
}

func TestSaveRefusesAndLoadVerifies(t *testing.T) {
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), []byte("x"), 0o600)
	if _, err := Save(context.Background(), source(), full, Options{}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("save into a non-empty dir: %v", err)
	}
	src := source()
	d := src.dumps[3]
	d.Stats.Ranges[0].Gen = 9 // newer than the table: the table moved on during the backup
	src.dumps[3] = d
	if _, err := Save(context.Background(), src, filepath.Join(t.TempDir(), "bk"), Options{}); err != ErrIncomplete {
		t.Fatalf("dump newer than the table: %v", err)
	}

	dir := filepath.Join(t.TempDir(), "bk")
	if _, err := Save(context.Background(), source(), dir, Options{}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(){
		"missing manifest": func() { os.Remove(filepath.Join(dir, ManifestFile)) },
		"damaged dump":     func() { os.WriteFile(filepath.Join(dir, "shard-2.dump"), []byte("state of twO"), 0o600) },
		"truncated dump":   func() { os.WriteFile(filepath.Join(dir, "shard-3.dump"), []byte("state"), 0o600) },
		"damaged table":    func() { os.WriteFile(filepath.Join(dir, TableFile), []byte{0x80}, 0o600) },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			cp := filepath.Join(t.TempDir(), "cp")
			b, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Copy(cp); err != nil {
				t.Fatal(err)
			}
			saved := dir
			dir = cp
			damage()
			dir = saved
			if _, err := Load(cp); err == nil {
				t.Fatal("a damaged backup loaded")
			}
		})
	}
}
