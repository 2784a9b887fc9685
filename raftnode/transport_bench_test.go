package raftnode

import (
	"net"
	"testing"
	"time"
)

// discardConn is a net.Conn that accepts every write.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error)      { return len(b), nil }
func (discardConn) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkSendMessageBatch is the sender's cost of one Raft message batch
// (framing and marshalling; the socket write is discarded).
func BenchmarkSendMessageBatch(b *testing.B) {
	p := &pairConn{c: discardConn{}, dead: make(chan struct{}), gen: 1}
	p.cond.L = &p.mu
	c := &batchConn{p: p}
	batch := batchWith(make([]byte, 256))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := c.SendMessageBatch(batch); err != nil {
			b.Fatal(err)
		}
	}
}
