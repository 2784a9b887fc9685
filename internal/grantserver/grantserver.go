// Package grantserver is a Warden wire server that answers every request
// OK at once (an acquire with a fresh token), with no Raft behind it: what
// benchmarks of the client and the load generator run against, so that
// their figures are the client side's cost alone.
package grantserver

import (
	"bufio"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wardenlock/warden/wire"
)

// Server batches its answers into one write per read, like the router.
type Server struct {
	ln    net.Listener
	wg    sync.WaitGroup
	Reads atomic.Int64 // reads that returned request bytes (about one per client write)
	token atomic.Uint64
}

// Start listens on 127.0.0.1 and serves until tb's cleanup.
func Start(tb testing.TB) *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var conns []net.Conn
		defer func() {
			for _, nc := range conns {
				nc.Close()
			}
		}()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, nc)
			s.wg.Add(1)
			go s.serve(nc)
		}
	}()
	tb.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

// Addr is the host:port to dial.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// countingReader counts the reads that reach the socket.
type countingReader struct {
	nc net.Conn
	n  *atomic.Int64
}

func (r countingReader) Read(p []byte) (int, error) {
	r.n.Add(1)
	return r.nc.Read(p)
}

func (s *Server) serve(nc net.Conn) {
	defer s.wg.Done()
	defer nc.Close()
	br := bufio.NewReaderSize(countingReader{nc, &s.Reads}, 64<<10)
	var in, out []byte
	var req wire.Request
	for {
		var err error
		in, err = wire.ReadFrame(br, wire.DefaultMaxFrame, in)
		if err != nil {
			return
		}
		req = wire.Request{}
		if err := wire.DecodeRequest(in, &req); err != nil {
			return
		}
		resp := wire.Response{ID: req.ID}
		if req.Op == wire.OpAcquire {
			resp.Token = s.token.Add(1)
		}
		out = wire.AppendResponseFrame(out, &resp)
		if br.Buffered() == 0 {
			if _, err := nc.Write(out); err != nil {
				return
			}
			out = out[:0]
		}
	}
}
