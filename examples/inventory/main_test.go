package main

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wardenlock/warden/fence"
	"github.com/wardenlock/warden/node/nodetest"
)

// TestPausedWorkerIsRefused runs the example against a real 3-node
// cluster: the worker that was paused past its lease writes with a stale
// token and the warehouse refuses it; only the fresh holder's reservation
// counts.
func TestPausedWorkerIsRefused(t *testing.T) {
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
		t.Fatalf("the paused worker's write: %v, want fence.ErrStaleToken", res.StaleErr)
	}
	if res.FreshToken <= res.StaleToken {
		t.Fatalf("fresh token %d is not above the stale %d", res.FreshToken, res.StaleToken)
	}
	if res.Stock != 6 || len(res.Log) != 1 {
		t.Fatalf("stock %d, log %q: want 6 and only worker B's reservation", res.Stock, res.Log)
	}
}
