package chaos

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what a link does with the bytes it carries.
type Mode int

const (
	Pass  Mode = iota // forward
	Drop              // blackhole: accept, read and discard; nothing arrives
	Delay             // forward every chunk after a fixed delay
	Flaky             // forward, but reset connections at random (a lossy link)
)

func (m Mode) String() string {
	return [...]string{"pass", "drop", "delay", "flaky"}[m]
}

// Link is one directed link (its dialer is the source). A change of mode that
// could leave a gap in a stream (into or out of Drop or Flaky) resets the
// connections it carries, so no stream resumes with a gap. Pass ↔ Delay does
// not: nothing is lost, and a connection that was delayed keeps its queue
// (with no added delay in Pass), so nothing is reordered either. (Resetting
// every Raft connection at each delay toggle made the delay fault mostly a
// connection-reset fault: dragonboat then drops all messages to a peer for
// 0.25–1 s per reset.)
type Link struct {
	Name  string
	mode  atomic.Int32
	delay atomic.Int64
	bytes atomic.Int64
	rng   *lockedRand

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// NewLink makes a link in Pass mode.
func NewLink(name string, seed int64) *Link {
	return &Link{Name: name, rng: newLockedRand(seed), conns: map[net.Conn]struct{}{}}
}

// Mode returns the current mode.
func (l *Link) Mode() Mode { return Mode(l.mode.Load()) }

// Bytes is the number of bytes the link has forwarded (both directions).
func (l *Link) Bytes() int64 { return l.bytes.Load() }

// Set changes the mode (delay matters for Delay) and resets the link's
// connections when the change could leave a gap.
func (l *Link) Set(m Mode, delay time.Duration) {
	l.delay.Store(int64(delay))
	if old := Mode(l.mode.Swap(int32(m))); old != m && !gapless(old, m) {
		l.reset()
	}
}

func gapless(a, b Mode) bool {
	calm := func(m Mode) bool { return m == Pass || m == Delay }
	return calm(a) && calm(b)
}

func (l *Link) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.Close()
	}
}

func (l *Link) track(cs ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		l.conns[c] = struct{}{}
	}
}

func (l *Link) untrack(cs ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		delete(l.conns, c)
		c.Close()
	}
}

// Classifier names the link an accepted connection belongs to. It may read
// the first bytes from br and returns them (the proxy forwards them first).
// A nil link means "unknown source": the connection is closed.
type Classifier func(br *bufio.Reader) (link *Link, consumed []byte)

// Proxy accepts TCP connections on its own 127.0.0.1 port and forwards them
// to a target through the link its classifier names.
type Proxy struct {
	Target   string
	classify Classifier

	ln     net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewProxy listens on a free 127.0.0.1 port and forwards to target.
func NewProxy(target string, classify Classifier) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Target: target, classify: classify, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// FixedLink classifies every connection as l (a proxy for one link).
func FixedLink(l *Link) Classifier {
	return func(*bufio.Reader) (*Link, []byte) { return l, nil }
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops the proxy and every connection it carries.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) hold(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.hold(in) {
			continue
		}
		p.wg.Add(1)
		go p.serve(in)
	}
}

func (p *Proxy) serve(in net.Conn) {
	defer p.wg.Done()
	defer p.drop(in)
	br := bufio.NewReaderSize(in, 64<<10)
	in.SetReadDeadline(time.Now().Add(5 * time.Second))
	link, consumed := p.classify(br)
	in.SetReadDeadline(time.Time{})
	if link == nil {
		return
	}
	link.track(in)
	defer link.untrack(in)
	src := io.MultiReader(bytes.NewReader(consumed), br)
	if link.Mode() == Drop {
		io.Copy(io.Discard, src) // until the mode changes (reset) or the peer gives up
		return
	}
	out, err := net.DialTimeout("tcp", p.Target, time.Second)
	if err != nil {
		return
	}
	if !p.hold(out) {
		return
	}
	defer p.drop(out)
	link.track(out)
	defer link.untrack(out)
	done := make(chan struct{}, 2)
	go func() { link.pipe(out, src, in); done <- struct{}{} }()
	go func() { link.pipe(in, out, out); done <- struct{}{} }()
	<-done
	in.Close()
	out.Close()
	<-done
}

// pipe copies src to dst chunk by chunk, applying the mode to each chunk.
// srcConn is closed to reset the connection.
func (l *Link) pipe(dst net.Conn, src io.Reader, srcConn net.Conn) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	var q chan chunk // delayed chunks, in order
	defer func() {
		if q != nil {
			close(q)
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			switch l.Mode() {
			case Drop:
				return // the mode changed under us: reset
			case Flaky:
				if l.rng.Float64() < 0.02 {
					return
				}
			case Delay, Pass:
				if l.Mode() == Pass && q == nil {
					break // plain forwarding below
				}
				if q == nil {
					q = make(chan chunk, 4096)
					go func(q chan chunk) {
						for c := range q {
							time.Sleep(time.Until(c.at))
							if _, err := dst.Write(c.b); err != nil {
								srcConn.Close()
								for range q {
								}
								return
							}
							l.bytes.Add(int64(len(c.b)))
						}
					}(q)
				}
				b := append([]byte(nil), buf[:n]...)
				at := time.Now()
				if l.Mode() == Delay {
					at = at.Add(time.Duration(l.delay.Load()))
				}
				select {
				case q <- chunk{b, at}:
				default:
					return // saturated: reset
				}
				continue
			}
			if q != nil { // the mode left Delay for Drop or Flaky under us: reset
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			l.bytes.Add(int64(n))
		}
		if err != nil {
			return
		}
	}
}
