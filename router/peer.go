package router

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/wardenlock/warden/wire"
)

// peer is a multiplexed connection to another node's client port, used to
// forward requests to the node that leads their shard. Forwarded requests
// carry the target shard (Request.Shard) so the far side executes them on its
// local replica instead of routing them again.
type peer struct {
	addr string

	mu      sync.Mutex
	conn    net.Conn
	out     []byte        // frames waiting for the writer
	wake    chan struct{} // tells the writer there is something in out
	nextID  uint64
	pending map[uint64]func(*wire.Response)
	streams map[uint64]func(*wire.Response) // watch pushes by stream id
	closed  bool
}

var errPeerClosed = errors.New("router: peer connection closed")

func dialPeer(addr string, timeout time.Duration, maxFrame int, dialer peerDialer) (*peer, error) {
	c, err := dialer.dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	p := &peer{addr: addr, conn: c, wake: make(chan struct{}, 1),
		pending: map[uint64]func(*wire.Response){}, streams: map[uint64]func(*wire.Response){}}
	hello := make(chan *wire.Response, 1)
	go p.readLoop(maxFrame)
	go p.writeLoop()
	p.send(&wire.Request{Op: wire.OpHello, Rev: wire.ProtocolVersion, Flags: wire.FlagPeer, Auth: dialer.secret},
		func(r *wire.Response) { hello <- r })
	select {
	case r := <-hello:
		if r.Code != wire.OK {
			p.close()
			return nil, fmt.Errorf("router: node %s refused this router's forwarding connection: %w", addr, r.AsError())
		}
		var info struct {
			Auth bool `json:"auth"`
		}
		json.Unmarshal(r.Value, &info)
		if dialer.learn != nil {
			dialer.learn(r.Value)
		}
		if info.Auth && !dialer.checks {
			// The node trusts what its peers forward; this router checks
			// nothing, so forwarding would let every client past the
			// node's policy.
			p.close()
			return nil, fmt.Errorf("router: node %s enforces authentication but this router has no auth config: "+
				"it would forward requests unchecked, so it does not forward (give it the nodes' --auth-config)", addr)
		}
	case <-time.After(timeout):
		p.close()
		return nil, errors.New("router: peer handshake timed out")
	}
	return p, nil
}

// send forwards req; done gets the answer, or a Closed/Unavailable answer if
// the connection breaks first. For a watch, done receives every push.
func (p *peer) send(req *wire.Request, done func(*wire.Response)) uint64 {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		done(&wire.Response{ID: req.ID, Code: wire.Unavailable, Msg: errPeerClosed.Error()})
		return 0
	}
	p.nextID++
	origID := req.ID
	fwd := *req
	fwd.ID = p.nextID
	wrapped := func(r *wire.Response) { r.ID = origID; done(r) }
	p.pending[fwd.ID] = wrapped
	if req.Op == wire.OpWatch {
		p.streams[fwd.ID] = wrapped
	}
	p.out = wire.AppendRequestFrame(p.out, &fwd)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return fwd.ID
}

// writeLoop sends whatever has queued since its last write in one syscall,
// so forwarding under load costs a write per batch, not per request.
func (p *peer) writeLoop() {
	var spare []byte
	for range p.wake {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		buf := p.out
		p.out = spare[:0]
		p.mu.Unlock()
		if len(buf) == 0 {
			spare = buf
			continue
		}
		if _, err := p.conn.Write(buf); err != nil {
			p.fail(err)
			return
		}
		spare = buf
	}
}

// unstream forgets a forwarded watch.
func (p *peer) unstream(id uint64) {
	p.mu.Lock()
	delete(p.streams, id)
	p.mu.Unlock()
}

func (p *peer) readLoop(maxFrame int) {
	r := bufio.NewReaderSize(p.conn, 64<<10)
	var buf []byte
	for {
		var err error
		buf, err = wire.ReadFrame(r, maxFrame, buf)
		if err != nil {
			p.fail(err)
			return
		}
		resp := new(wire.Response)
		if err := wire.DecodeResponse(buf, resp); err != nil {
			p.fail(err)
			return
		}
		p.mu.Lock()
		var done func(*wire.Response)
		if resp.Stream != 0 {
			done = p.streams[resp.Stream]
			if resp.Code != wire.OK {
				delete(p.streams, resp.Stream)
			}
		} else {
			done = p.pending[resp.ID]
			delete(p.pending, resp.ID)
		}
		p.mu.Unlock()
		if done != nil {
			done(resp)
		}
	}
}

func (p *peer) fail(err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	pending, streams := p.pending, p.streams
	p.pending, p.streams = nil, nil
	p.conn.Close()
	p.mu.Unlock()
	select { // wake the writer so it sees closed and exits
	case p.wake <- struct{}{}:
	default:
	}
	for id, done := range pending {
		if _, isStream := streams[id]; isStream {
			continue
		}
		done(&wire.Response{Code: wire.Unavailable, Msg: "forwarding connection lost: " + err.Error()})
	}
	for _, done := range streams {
		done(&wire.Response{Code: wire.Unavailable, Msg: "forwarding connection lost: " + err.Error()})
	}
}

func (p *peer) close() { p.fail(errPeerClosed) }

func (p *peer) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// peers keeps one connection per node address.
type peers struct {
	mu       sync.Mutex
	m        map[string]*peer
	timeout  time.Duration
	maxFrame int
	dialer   peerDialer
}

func (ps *peers) get(addr string) (*peer, error) {
	ps.mu.Lock()
	p := ps.m[addr]
	ps.mu.Unlock()
	if p != nil && !p.isClosed() {
		return p, nil
	}
	np, err := dialPeer(addr, ps.timeout, ps.maxFrame, ps.dialer)
	if err != nil {
		return nil, err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if cur := ps.m[addr]; cur != nil && !cur.isClosed() {
		np.close()
		return cur, nil
	}
	ps.m[addr] = np
	return np, nil
}

func (ps *peers) closeAll() {
	ps.mu.Lock()
	all := ps.m
	ps.m = map[string]*peer{}
	ps.mu.Unlock()
	for _, p := range all {
		p.close()
	}
}
