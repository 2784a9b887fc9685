package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/wardenlock/warden/internal/atomicfile"
)

// The manifest is the node's own record of which replicas it hosts, so a
// restart starts exactly those: once replicas move between machines, the
// initial member list no longer says what a node holds, and the table
// cannot be read before the meta replica runs. It is rewritten (atomically)
// whenever a replica is started or removed here.

const manifestFile = "replicas.json"

// localReplica is one replica this node hosts.
type localReplica struct {
	Shard     uint64 `json:"shard"`
	RID       uint64 `json:"rid"`
	NonVoting bool   `json:"non_voting,omitempty"`
	// New: a replica of a shard created at runtime, recorded before
	// dragonboat recorded its member list (lifecycle.go).
	New bool `json:"new,omitempty"`
}

type manifest struct {
	Meta   *localReplica  `json:"meta,omitempty"` // nil: not a member of the meta group yet (joining)
	Shards []localReplica `json:"shards"`
}

func manifestPath(dataDir string) string { return filepath.Join(dataDir, manifestFile) }

// loadManifest reads the manifest; (nil, nil) when there is none (a fresh
// data dir, or one made before manifests existed).
func loadManifest(dataDir string) (*manifest, error) {
	b, err := os.ReadFile(manifestPath(dataDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("shard: manifest %s: %w", manifestPath(dataDir), err)
	}
	return &m, nil
}

func (m *manifest) save(dataDir string) error {
	sort.Slice(m.Shards, func(i, j int) bool { return m.Shards[i].Shard < m.Shards[j].Shard })
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	return atomicfile.Write(manifestPath(dataDir), b, 0o644)
}

func (m *manifest) set(r localReplica) {
	for i := range m.Shards {
		if m.Shards[i].Shard == r.Shard {
			m.Shards[i] = r
			return
		}
	}
	m.Shards = append(m.Shards, r)
}

func (m *manifest) drop(shard uint64) {
	for i := range m.Shards {
		if m.Shards[i].Shard == shard {
			m.Shards = append(m.Shards[:i], m.Shards[i+1:]...)
			return
		}
	}
}
