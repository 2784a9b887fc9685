package router

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Read deadlines after the handshake (the handshake has its own,
// Security.HelloTimeout):
//
//   - a frame whose first byte has arrived must arrive whole within
//     Security.FrameTimeout, or the connection is closed (a client that
//     sends half a frame and stalls holds a reader, a buffer and a slot of
//     its address's connection limit);
//   - a connection that has nothing open (no request in flight, no parked
//     wait, no watch, no hold stream) and sends nothing for
//     Security.IdleTimeout is closed. Waits, watches and hold streams may
//     legitimately stay silent for hours: they keep a connection open,
//     and TCP keepalive finds a peer that vanished. The Go client opens a
//     hold stream on every connection, so its connections are never idle.
//
// One read deadline serves both, moved at most once per eighth of
// FrameTimeout and only when a read may block: the reader does not touch
// the runtime's timers per frame. Every frame gets at least FrameTimeout
// (at most an eighth more); an idle connection's state is looked at each
// time the deadline passes.

// readDeadline is the reader goroutine's deadline bookkeeping.
type readDeadline struct {
	move time.Duration // monoNow after which the deadline is moved again
}

// arm moves the read deadline when it is due: at least FrameTimeout away.
func (c *conn) armRead(force bool) {
	ft := c.s.cfg.Security.FrameTimeout
	now := monoNow()
	if !force && now < c.rd.move {
		return
	}
	c.nc.SetReadDeadline(time.Now().Add(ft + ft/8))
	c.rd.move = now + ft/8
}

// awaitFrame waits for the first byte of the next frame on a connection
// whose buffer is empty, closing it when it has been idle too long; false
// means the connection is done.
func (c *conn) awaitFrame(r *bufio.Reader) bool {
	idleSince := monoNow()
	for {
		c.armRead(false)
		_, err := r.Peek(1)
		if err == nil {
			return true
		}
		if !isTimeout(err) {
			return false
		}
		now := monoNow()
		if !c.idleEligible() {
			idleSince = now
		} else if it := c.s.cfg.Security.IdleTimeout; it > 0 && now-idleSince >= it {
			idleClosed.Add(1)
			c.send(&wire.Response{Code: wire.Closed,
				Msg: fmt.Sprintf("idle for %v with nothing open: closing (reconnect when needed)", it)})
			return false
		}
		c.armRead(true)
	}
}

// idleEligible reports whether the connection has nothing open that may
// legitimately keep it silent.
func (c *conn) idleEligible() bool {
	if c.peer || len(c.sem) > 0 || c.sec.pendingWatches.Load() > 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.parked) == 0 && len(c.watches) == 0 && c.holdStream == 0
}

// frameBuffered reports whether the next frame is in r's buffer whole, so
// reading it cannot block.
func frameBuffered(r *bufio.Reader) bool {
	n := r.Buffered()
	if n < wire.FrameHeaderSize {
		return false
	}
	hdr, _ := r.Peek(wire.FrameHeaderSize)
	return n-wire.FrameHeaderSize >= int(binary.BigEndian.Uint32(hdr))
}

// stalled tells a client whose frame stayed incomplete why it is closed.
func (c *conn) stalled() {
	stalledClosed.Add(1)
	c.send(&wire.Response{Code: wire.Malformed,
		Msg: fmt.Sprintf("a frame stayed incomplete for %v: closing", c.s.cfg.Security.FrameTimeout)})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
