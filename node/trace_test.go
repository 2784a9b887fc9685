package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/shard"
	"github.com/wardenlock/warden/wire"
)

func recorder(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() {
		router.SetTracer(nil)
		shard.SetTracer(nil)
		tp.Shutdown(context.Background())
	})
	return rec, tp
}

func spanAttr(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestTraceFollowsAForwardedLock: a client with a tracer takes a lock
// through a node that does not lead the lock's shard. One trace holds the
// client span, the entry node's router span (its child), the leader node's
// router span for the forwarded request (the entry span's child) and the
// shard's apply span on the leader (the leader router span's child).
func TestTraceFollowsAForwardedLock(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 1})
	rec, tp := recorder(t)
	router.SetTracer(tp.Tracer("router"))
	shard.SetTracer(tp.Tracer("shard"))
	ids := c.ShardIDs()
	if len(ids) != 1 {
		t.Fatalf("data shards %v, want one", ids)
	}
	ctx := ctxT(t, 60*time.Second)

	for attempt := 0; ; attempt++ {
		leader := c.LeaderOf(ids[0])
		if leader < 0 {
			c.WaitReady(30 * time.Second)
			continue
		}
		entry := (leader + 1) % len(c.Nodes)
		cl, err := client.New(ctx, []string{c.Cfgs[entry].ClientAddr}, client.WithoutDirectRouting(),
			client.WithTracer(tp.Tracer("client")), client.WithRequestTimeout(15*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		path := fmt.Sprintf("/traced/lock-%d", attempt)
		lk, err := cl.Acquire(ctx, path, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		cl.Close()
		if c.LeaderOf(ids[0]) != leader {
			// The shard changed leader under the request: which node
			// applied it is not the one this attempt aimed at.
			if attempt == 4 {
				t.Fatal("shard leadership kept moving")
			}
			continue
		}
		checkForwardedTrace(t, rec.Ended(), path, lk.Token(), int64(c.Cfgs[entry].ID), int64(c.Cfgs[leader].ID))
		return
	}
}

func checkForwardedTrace(t *testing.T, ended []sdktrace.ReadOnlySpan, path string, token uint64, entryNode, leaderNode int64) {
	t.Helper()
	var root sdktrace.ReadOnlySpan
	for _, s := range ended {
		if s.Name() == "acquire" && s.SpanKind() == trace.SpanKindClient && spanAttr(s, "warden.path").AsString() == path {
			if root != nil {
				t.Fatalf("two client spans for one Acquire")
			}
			root = s
		}
	}
	if root == nil {
		t.Fatalf("no client span for %s among %d spans", path, len(ended))
	}
	if root.Parent().IsValid() || spanAttr(root, "warden.token").AsInt64() != int64(token) {
		t.Errorf("client span: parent %v token %v, want a root with token %d", root.Parent(), spanAttr(root, "warden.token"), token)
	}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var inTrace []sdktrace.ReadOnlySpan
	for _, s := range ended {
		if s.SpanContext().TraceID() == root.SpanContext().TraceID() {
			byID[s.SpanContext().SpanID()] = s
			inTrace = append(inTrace, s)
		}
	}
	var applies []sdktrace.ReadOnlySpan
	for _, s := range inTrace {
		if s != root {
			if _, ok := byID[s.Parent().SpanID()]; !ok {
				t.Errorf("span %s on node %v: parent %v is not in the trace", s.Name(), spanAttr(s, "warden.node"), s.Parent().SpanID())
			}
		}
		if s.Name() == "shard.apply acquire" {
			applies = append(applies, s)
			if n := spanAttr(s, "warden.node").AsInt64(); n != leaderNode {
				t.Errorf("apply span on node %d, want the leader %d", n, leaderNode)
			}
		}
	}
	if len(applies) == 0 {
		t.Fatalf("no shard apply span in the trace: %v", names(inTrace))
	}
	// Walk up from a successful apply: leader router → entry router → client.
	for _, a := range applies {
		if spanAttr(a, "warden.code").AsString() != wire.OK.String() || spanAttr(a, "warden.token").AsInt64() != int64(token) {
			continue
		}
		if spanAttr(a, "warden.batch.ops").AsInt64() < 1 {
			t.Errorf("apply span without its batch size")
		}
		lead := byID[a.Parent().SpanID()]
		if lead == nil || lead.SpanKind() != trace.SpanKindServer || spanAttr(lead, "warden.node").AsInt64() != leaderNode {
			t.Fatalf("apply span's parent %v: want the leader's router span", describe(lead))
		}
		first := byID[lead.Parent().SpanID()]
		if first == nil || first.SpanKind() != trace.SpanKindServer || spanAttr(first, "warden.node").AsInt64() != entryNode {
			t.Fatalf("leader router span's parent %v: want the entry node's router span", describe(first))
		}
		if first.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Fatalf("entry router span's parent %v: want the client span", first.Parent().SpanID())
		}
		return
	}
	t.Fatalf("no apply span granted token %d: %v", token, names(inTrace))
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, describe(s))
	}
	return out
}

func describe(s sdktrace.ReadOnlySpan) string {
	if s == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s@node%d", s.Name(), spanAttr(s, "warden.node").AsInt64())
}

// TestNoTraceWhenOff: with the client and the routers not tracing, no
// request reaches a shard with a trace context. The shards' tracer is on
// to show it (a shard spans every request that carries one), and a traced
// client afterwards shows the shards would have recorded it.
func TestNoTraceWhenOff(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{Shards: 1})
	rec, tp := recorder(t)
	shard.SetTracer(tp.Tracer("shard"))
	ctx := ctxT(t, 60*time.Second)

	plain, err := client.New(ctx, c.Endpoints(), client.WithRequestTimeout(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	lk, err := plain.Acquire(ctx, "/untraced/lock", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Put(ctx, "/untraced/kv", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Get(ctx, "/untraced/kv"); err != nil {
		t.Fatal(err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.Ended(); len(got) != 0 {
		t.Fatalf("tracing off, yet %d spans: %v", len(got), names(got))
	}

	traced, err := client.New(ctx, c.Endpoints(), client.WithRequestTimeout(15*time.Second),
		client.WithTracer(tp.Tracer("client")))
	if err != nil {
		t.Fatal(err)
	}
	defer traced.Close()
	if _, err := traced.Put(ctx, "/traced/kv", []byte("v")); err != nil {
		t.Fatal(err)
	}
	var put, apply sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "kv.put":
			put = s
		case "shard.apply kv.put":
			apply = s
		}
	}
	if put == nil || apply == nil || apply.Parent().SpanID() != put.SpanContext().SpanID() {
		t.Fatalf("traced client: spans %v, want the shard's apply span under the client's (routers pass the context on)", names(rec.Ended()))
	}
}
