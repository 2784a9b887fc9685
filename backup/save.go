package backup

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/wardenlock/warden/control"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/statemachine"
)

// Source is where a backup reads from: a node's host directly, or a node's
// admin API over HTTP.
type Source interface {
	// Table is the range table, read linearizably from the meta group.
	Table(ctx context.Context) (*placement.Table, error)
	// Dump is one data shard's whole state, read linearizably.
	Dump(ctx context.Context, shardID uint64) (statemachine.Dump, error)
}

// Options tune Save.
type Options struct {
	FenceMargin uint64 // default DefaultFenceMargin
	Source      string // recorded in the manifest
}

// Save writes a backup of every data shard into dir (created; must be
// empty). Each shard's dump is its state at one linearizable point; shards
// are read one after another (a hierarchical lock never spans shards, so
// each lock's state is whole). The table is read after the dumps so that
// it is at least as new as every range generation they hold.
func Save(ctx context.Context, src Source, dir string, o Options) (*Manifest, error) {
	if o.FenceMargin == 0 {
		o.FenceMargin = DefaultFenceMargin
	}
	if err := emptyDir(dir); err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 3; attempt++ {
		m, err := save(ctx, src, dir, o)
		if err != ErrIncomplete {
			return m, err
		}
	}
	return nil, ErrIncomplete
}

func save(ctx context.Context, src Source, dir string, o Options) (*Manifest, error) {
	before, err := src.Table(ctx)
	if err != nil {
		return nil, fmt.Errorf("backup: read the range table: %w", err)
	}
	if before == nil {
		return nil, fmt.Errorf("backup: the cluster has no range table yet")
	}
	m := &Manifest{Format: Format, Created: time.Now().UTC(), Source: o.Source, FenceMargin: o.FenceMargin}
	dumps := map[uint64][]byte{}
	// The shards that may hold state: a shard being created holds none (and
	// may have no leader to dump it yet).
	for _, si := range before.Serving() {
		d, err := src.Dump(ctx, si.ID)
		if err != nil {
			return nil, fmt.Errorf("backup: dump shard %d: %w", si.ID, err)
		}
		e := shardEntry(si.ID, d)
		e.File = fileRef(fmt.Sprintf("shard-%d.dump", si.ID), d.State)
		dumps[si.ID] = d.State
		m.Shards = append(m.Shards, e)
	}
	t, err := src.Table(ctx)
	if err != nil {
		return nil, fmt.Errorf("backup: read the range table: %w", err)
	}
	for _, s := range m.Shards {
		if s.RangeGen > t.Gen {
			return nil, ErrIncomplete
		}
	}
	// A shard created or retired while the dumps were read: its ranges
	// may be in no dump (or two); read them all again.
	for _, r := range t.Ranges {
		if _, ok := dumps[r.Shard]; !ok {
			return nil, ErrIncomplete
		}
	}
	sortShards(m.Shards)
	tb, err := msgpack.Marshal(t)
	if err != nil {
		return nil, err
	}
	m.TableGen, m.NamespaceDepth = t.Gen, t.NamespaceDepth
	m.Table = fileRef(TableFile, tb)
	// A retry after ErrIncomplete starts from an empty directory again.
	if err := clearDir(dir); err != nil {
		return nil, err
	}
	if err := writeFile(dir, TableFile, tb); err != nil {
		return nil, err
	}
	for _, s := range m.Shards {
		if err := writeFile(dir, s.File.Name, dumps[s.ID]); err != nil {
			return nil, err
		}
	}
	return m, writeManifest(dir, m)
}

// HostSource reads from a node in this process.
type HostSource struct{ Host *control.Host }

// Table implements Source.
func (s HostSource) Table(ctx context.Context) (*placement.Table, error) {
	return s.Host.RefreshTable(ctx)
}

// Dump implements Source.
func (s HostSource) Dump(ctx context.Context, id uint64) (statemachine.Dump, error) {
	return s.Host.Dump(ctx, id)
}

// HTTPSource reads through a node's admin API (GET /v1/backup/table and
// /v1/backup/shards/<id>).
type HTTPSource struct {
	Base   string // e.g. http://127.0.0.1:7270
	Client *http.Client
}

// Table implements Source.
func (s HTTPSource) Table(ctx context.Context) (*placement.Table, error) {
	body, _, err := s.get(ctx, "/v1/backup/table")
	if err != nil {
		return nil, err
	}
	t := &placement.Table{}
	if err := msgpack.Unmarshal(body, t); err != nil {
		return nil, fmt.Errorf("backup: table from %s: %w", s.Base, err)
	}
	return t, nil
}

// StatsHeader carries a dump's statistics beside its bytes (EncodeStats).
const StatsHeader = "X-Warden-Dump-Stats"

// EncodeStats encodes a dump's statistics for StatsHeader: msgpack in
// base64 (range keys are binary).
func EncodeStats(st statemachine.Stats) (string, error) {
	b, err := msgpack.Marshal(st)
	return base64.StdEncoding.EncodeToString(b), err
}

func decodeStats(h string) (statemachine.Stats, error) {
	var st statemachine.Stats
	b, err := base64.StdEncoding.DecodeString(h)
	if err == nil {
		err = msgpack.Unmarshal(b, &st)
	}
	return st, err
}

// Dump implements Source.
func (s HTTPSource) Dump(ctx context.Context, id uint64) (statemachine.Dump, error) {
	body, h, err := s.get(ctx, "/v1/backup/shards/"+strconv.FormatUint(id, 10))
	if err != nil {
		return statemachine.Dump{}, err
	}
	d := statemachine.Dump{State: body}
	if d.Stats, err = decodeStats(h.Get(StatsHeader)); err != nil {
		return d, fmt.Errorf("backup: dump of shard %d: stats header: %w", id, err)
	}
	return d, nil
}

func (s HTTPSource) get(ctx context.Context, path string) ([]byte, http.Header, error) {
	c := s.Client
	if c == nil {
		c = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.Base, "/")+path, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("backup: GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, resp.Header, nil
}
