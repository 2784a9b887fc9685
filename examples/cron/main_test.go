package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/fence"
	"github.com/wardenlock/warden/node/nodetest"
)

// TestFrozenLeaderIsRefused runs the example against a real 3-node cluster:
// the leader that froze in the middle of a run loses leadership to the
// waiting instance, and its late write is refused by the ledger.
func TestFrozenLeaderIsRefused(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	res, err := run(ctx, c.AllEndpoints(), &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res.StaleErr, fence.ErrStaleToken) {
		t.Fatalf("the frozen leader's write: %v, want fence.ErrStaleToken", res.StaleErr)
	}
	if res.NewToken <= res.OldToken {
		t.Fatalf("new leader's token %d is not above the old %d", res.NewToken, res.OldToken)
	}
	if len(res.Runs) != 2 || !strings.HasPrefix(res.Runs[0], "cron-a run 1") || !strings.HasPrefix(res.Runs[1], "cron-b") {
		t.Fatalf("ledger %q: want cron-a's first run and cron-b's run only", res.Runs)
	}
}
