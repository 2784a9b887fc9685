package raftnode

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// startTransport runs a transport on a free loopback port; its handlers
// record what arrives.
type recorder struct {
	mu      sync.Mutex
	batches []pb.MessageBatch
	chunks  []pb.Chunk
	got     chan struct{}
	reject  bool // the chunk handler refuses
}

func startTransport(t *testing.T, rec *recorder) (*raftTransport, string) {
	t.Helper()
	nhc := config.NodeHostConfig{RaftAddress: "127.0.0.1:1", ListenAddress: "127.0.0.1:0"}
	tr := TransportFactory{}.Create(nhc, func(b pb.MessageBatch) {
		rec.mu.Lock()
		rec.batches = append(rec.batches, b)
		rec.mu.Unlock()
		rec.got <- struct{}{}
	}, func(c pb.Chunk) bool {
		rec.mu.Lock()
		rec.chunks = append(rec.chunks, c)
		rec.mu.Unlock()
		return !rec.reject
	}).(*raftTransport)
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, tr.ln.Addr().String()
}

func batchWith(cmd []byte) pb.MessageBatch {
	return pb.MessageBatch{DeploymentId: 7070, SourceAddress: "127.0.0.1:7170", BinVer: 210,
		Requests: []pb.Message{{Type: pb.Replicate, ShardID: 3, From: 1, To: 2, Term: 4,
			Entries: []pb.Entry{{Index: 9, Term: 4, Cmd: cmd}}}}}
}

// connectTo starts a sending transport and returns its connection to
// addr, closed when the test ends.
func connectTo(t *testing.T, addr string) raftio.IConnection {
	t.Helper()
	sender, _ := startTransport(t, &recorder{got: make(chan struct{}, 1)})
	conn, err := sender.GetConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// Batches arrive whole and in order, including one larger than the read
// buffer, and an earlier batch is not overwritten when the receive buffer
// is reused for the next one.
func TestTransportDeliversBatches(t *testing.T) {
	rec := &recorder{got: make(chan struct{}, 8)}
	_, addr := startTransport(t, rec)
	conn := connectTo(t, addr)
	small := []byte("acquire /locks/a")
	large := bytes.Repeat([]byte("x"), 300<<10)
	for _, cmd := range [][]byte{small, large, small} {
		if err := conn.SendMessageBatch(batchWith(cmd)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		<-rec.got
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, want := range [][]byte{small, large, small} {
		b := rec.batches[i]
		if b.DeploymentId != 7070 || b.SourceAddress != "127.0.0.1:7170" || b.BinVer != 210 || len(b.Requests) != 1 {
			t.Fatalf("batch %d arrived as %+v", i, b)
		}
		m := b.Requests[0]
		if m.Type != pb.Replicate || m.ShardID != 3 || m.To != 2 || len(m.Entries) != 1 || !bytes.Equal(m.Entries[0].Cmd, want) {
			t.Fatalf("batch %d: message %v with %d entries differs from what was sent", i, m.Type, len(m.Entries))
		}
	}
}

// Every chunk of a snapshot stream has reached the handler by the time the
// sender's Close returns.
func TestTransportSnapshotChunksBeforeClose(t *testing.T) {
	rec := &recorder{got: make(chan struct{}, 1)}
	_, addr := startTransport(t, rec)
	sender, _ := startTransport(t, &recorder{got: make(chan struct{}, 1)})
	sc, err := sender.GetSnapshotConnection(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < 3; i++ {
		c := pb.Chunk{ShardID: 3, ReplicaID: 2, From: 1, Index: 100, Term: 4, ChunkId: i, ChunkCount: 3,
			Data: bytes.Repeat([]byte{byte(i)}, 1000)}
		if err := sc.SendChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	sc.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.chunks) != 3 {
		t.Fatalf("%d chunks handled when Close returned, want 3", len(rec.chunks))
	}
	for i, c := range rec.chunks {
		if c.ChunkId != uint64(i) || c.ChunkCount != 3 || len(c.Data) != 1000 || c.Data[0] != byte(i) {
			t.Fatalf("chunk %d arrived as id %d count %d len %d", i, c.ChunkId, c.ChunkCount, len(c.Data))
		}
	}
}

// A corrupted frame, or a connection that does not start with the
// preamble, is dropped without reaching the handlers.
func TestTransportDropsBadInput(t *testing.T) {
	good, _ := appendRaftFrame(nil, frameBatch, func() *pb.MessageBatch { b := batchWith([]byte("a")); return &b }(), 4096)
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 0xff
	huge := append([]byte(nil), good[:frameHeader]...)
	binary.BigEndian.PutUint32(huge[1:5], maxRaftFrame+1)
	tests := []struct {
		name string
		send []byte
	}{
		{"bad checksum", append(transportPreamble[:], corrupt...)},
		{"frame over the limit", append(transportPreamble[:], huge...)},
		{"no preamble", good},
		{"unknown kind", append(transportPreamble[:], append([]byte{9}, good[1:]...)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{got: make(chan struct{}, 1)}
			_, addr := startTransport(t, rec)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang fails, not blocks the suite
			if _, err := io.ReadAll(c); err != nil {
				t.Fatalf("the transport did not close the connection: %v", err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.batches) != 0 {
				t.Fatalf("a bad frame reached the handler: %+v", rec.batches)
			}
		})
	}
}

func TestTransportValidate(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7170": true, "node-1.warden:7170": true, "[::1]:7170": true,
		"127.0.0.1": false, ":7170": false, "127.0.0.1:0": false, "127.0.0.1:99999": false, "a:b": false,
	} {
		if got := (TransportFactory{}).Validate(addr); got != want {
			t.Errorf("Validate(%q) = %v, want %v", addr, got, want)
		}
	}
}

// A connection whose peer went away (a restarted node) is replaced before
// the next batch: the batch reaches the restarted peer instead of vanishing
// into the dead connection, and the sender reports no error (which would
// make dragonboat drop every message to the peer for up to a second).
func TestTransportReplacesConnectionThePeerClosed(t *testing.T) {
	rec := &recorder{got: make(chan struct{}, 8)}
	first, addr := startTransport(t, rec)
	conn := connectTo(t, addr)
	if err := conn.SendMessageBatch(batchWith([]byte("before"))); err != nil {
		t.Fatal(err)
	}
	<-rec.got
	first.Close() // the peer restarts on the same address
	rec2 := &recorder{got: make(chan struct{}, 8)}
	nhc := config.NodeHostConfig{RaftAddress: "127.0.0.1:1", ListenAddress: addr}
	second := TransportFactory{}.Create(nhc, func(b pb.MessageBatch) {
		rec2.mu.Lock()
		rec2.batches = append(rec2.batches, b)
		rec2.mu.Unlock()
		rec2.got <- struct{}{}
	}, func(pb.Chunk) bool { return true }).(*raftTransport)
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	bc := conn.(*batchConn)
	select {
	case <-bc.p.deadSignal():
	case <-time.After(10 * time.Second):
		t.Fatal("the sender never noticed that the peer closed the connection")
	}
	for i, cmd := range []string{"after-1", "after-2"} {
		if err := conn.SendMessageBatch(batchWith([]byte(cmd))); err != nil {
			t.Fatalf("batch %d after the peer restarted: %v", i, err)
		}
	}
	for i := 0; i < 2; i++ {
		select {
		case <-rec2.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of 2 batches reached the restarted peer", i)
		}
	}
	rec2.mu.Lock()
	defer rec2.mu.Unlock()
	if got := string(rec2.batches[0].Requests[0].Entries[0].Cmd); got != "after-1" {
		t.Fatalf("the restarted peer's first batch is %q, want after-1", got)
	}
}

// dragonboat's streams to one peer share a connection: batches sent from
// several streams at once all arrive, each stream's in its order, over one
// accepted connection, and closing one stream leaves the others working
// until the last one closes the connection.
func TestTransportStreamsShareOneConnection(t *testing.T) {
	const streams, each = 4, 50
	rec := &recorder{got: make(chan struct{}, streams*each+8)}
	receiver, addr := startTransport(t, rec)
	sender, _ := startTransport(t, &recorder{got: make(chan struct{}, 1)})
	conns := make([]raftio.IConnection, streams)
	for i := range conns {
		c, err := sender.GetConnection(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	var wg sync.WaitGroup
	for s, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := c.SendMessageBatch(batchWith([]byte(fmt.Sprintf("%d-%d", s, i)))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	waitBatches(t, rec, streams*each)
	receiver.mu.Lock()
	accepted := len(receiver.conns)
	receiver.mu.Unlock()
	if accepted != 1 {
		t.Fatalf("%d connections accepted from one peer, want 1", accepted)
	}
	rec.mu.Lock()
	next := make([]int, streams)
	for _, b := range rec.batches {
		var s, i int
		fmt.Sscanf(string(b.Requests[0].Entries[0].Cmd), "%d-%d", &s, &i)
		if i != next[s] {
			t.Fatalf("stream %d: batch %d arrived when %d was due", s, i, next[s])
		}
		next[s]++
	}
	rec.mu.Unlock()

	conns[0].Close()
	if err := conns[1].SendMessageBatch(batchWith([]byte("after-close"))); err != nil {
		t.Fatalf("a stream after another closed: %v", err)
	}
	waitBatches(t, rec, streams*each+1)
	for _, c := range conns[1:] {
		c.Close()
	}
	sender.mu.Lock()
	left := len(sender.pairs)
	sender.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d peer connections left after every stream closed", left)
	}
}

func waitBatches(t *testing.T, rec *recorder, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		rec.mu.Lock()
		got := len(rec.batches)
		rec.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-rec.got:
		case <-deadline:
			t.Fatalf("%d of %d batches arrived", got, n)
		}
	}
}
