package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wardenlock/warden/node/nodetest"
)

// TestQuickstartRuns runs the README's and docs/api.md's Go tour against a
// real 3-node cluster, on fresh sessions: WithLease on a session that has
// locked nothing, TryLock refused while a child is held and granted once it
// is released, a revocation request heard by the holder, a hand-over.
func TestQuickstartRuns(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, c.AllEndpoints(), &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"/locks/billing is busy: job-7 is held",
		"holding /locks/billing with token",
		"/services/api/n1 = 10.0.0.5:8080 (version 1)",
		"leading /elections/scheduler with token",
		"tokens true true",
		"asked to release before",
		"node-b leads with token",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
