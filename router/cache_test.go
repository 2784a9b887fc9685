package router

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

// silentSeed accepts connections, answers the hello and never anything else:
// a node that took a table read and died before answering it (the router's
// view of a read index sent to a meta leader that then crashed).
func silentSeed(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				r := bufio.NewReader(nc)
				for {
					body, err := wire.ReadFrame(r, wire.DefaultMaxFrame, nil)
					if err != nil {
						return
					}
					var req wire.Request
					if wire.DecodeRequest(body, &req) == nil && req.Op == wire.OpHello {
						b, _ := wire.AppendFrame(nil, &wire.Response{ID: req.ID})
						nc.Write(b)
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestRefreshIsBoundedWhateverTheCallersDeadline: a route retry refreshes
// the table with the request's deadline, which for a waiting acquire is its
// whole wait. A table read that is never answered must not hold the retry
// (and every request coalesced with it) that long: a client blocked in an
// acquire through such a router never heard of its grant.
func TestRefreshIsBoundedWhateverTheCallersDeadline(t *testing.T) {
	s := &Server{cfg: Config{Seeds: []string{silentSeed(t)}}}
	s.cfg.fill()
	s.peers = &peers{m: map[string]*peer{}, timeout: s.cfg.DialTimeout, maxFrame: s.cfg.MaxFrame}
	t.Cleanup(s.peers.closeAll)
	rc := newRangeCache(s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a long wait's budget
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rc.refresh(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a refresh from a seed that never answers succeeded")
		}
	case <-time.After(time.Minute):
		t.Fatal("the refresh waited for the caller's whole deadline")
	}
}
