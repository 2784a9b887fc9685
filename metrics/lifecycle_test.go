package metrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/placement"
)

// A shard created while the node runs gets its series, its grants are
// counted; once it is retired its series are gone.
func TestScrapeFollowsShardsCreatedAndRetired(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 1, Edit: func(cfg *node.Config) { cfg.AdminAddr = "127.0.0.1:0" }})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := c.Nodes[0].Host
	id, err := h.CreateShard(ctx, nil, true, "test")
	if err != nil {
		t.Fatal(err)
	}
	c.WaitFor(60*time.Second, "the new shard holds a range", func() error {
		return shardHolds(ctx, h, id, true)
	})
	if err := h.RetireShard(ctx, 2, "test"); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(60*time.Second, "shard 2 retired", func() error {
		return shardHolds(ctx, h, 2, false)
	})
	cl, err := client.New(ctx, c.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const acquires = 5
	for i := 0; i < acquires; i++ {
		if _, err := cl.Acquire(ctx, "/m/ns/job"+string(rune('a'+i)), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var sum map[string]float64
	c.WaitFor(30*time.Second, "the grants counted", func() error {
		sum, _ = scrape(t, c)
		if got := series(sum, "warden_locks_granted_total"); got < acquires {
			return errorf("%v grants counted, want %d", got, acquires)
		}
		return nil
	})
	if got := series(sum, "warden_raft_has_leader", `shard="3"`); got != 3 {
		t.Errorf("has_leader of the new shard summed over 3 nodes: %v, want 3", got)
	}
	if got := series(sum, "warden_raft_has_leader", `shard="2"`); got != 0 {
		t.Errorf("a retired shard still has series: %v", got)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func errorf(format string, args ...any) error {
	return errString(fmt.Sprintf(format, args...))
}

// shardHolds reports (as an error until true) whether shard id is active
// with a range (want) or retired (!want).
func shardHolds(ctx context.Context, h interface {
	RefreshTable(context.Context) (*placement.Table, error)
}, id uint64, want bool) error {
	t, err := h.RefreshTable(ctx)
	if err != nil || t == nil {
		return errorf("no table: %v", err)
	}
	if want {
		si, ok := t.Shard(id)
		if !ok || si.State != placement.ShardActive || si.Fill || len(t.RangesOf(id)) == 0 || len(t.RangeMoves) > 0 {
			return errorf("shard %d: %+v, %d ranges", id, si, len(t.RangesOf(id)))
		}
		return nil
	}
	if rs, ok := t.RetiredOf(id); !ok || rs.State() != placement.ShardRetired {
		return errorf("shard %d not retired: %+v", id, rs)
	}
	return nil
}
