package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// ErrPlaintextExposed: the admin port would serve without TLS on an address
// other machines can reach. Everything it serves, the whole dataset in the
// backup endpoints included, would then cross the network in clear to
// whoever connects.
var ErrPlaintextExposed = errors.New("admin: refusing to serve the admin port without TLS on a non-loopback address")

// CheckExposure refuses (ErrPlaintextExposed) to serve the admin port on
// addr without TLS unless every address addr names is a loopback address
// (127.0.0.0/8, ::1, or a name that resolves only to those), or
// plaintextAnywhere says the operator chose it. An empty host ("":7270) and
// 0.0.0.0 or :: listen on every interface, so they are exposed.
func CheckExposure(addr string, tlsOn, plaintextAnywhere bool) error {
	if tlsOn || plaintextAnywhere {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("admin: address %q: %w", addr, err)
	}
	if loopbackHost(host) {
		return nil
	}
	return fmt.Errorf("%w (%s): give the node TLS (--tls-dir), listen on 127.0.0.1, "+
		"or pass --insecure-plaintext-admin to serve every key, lock and session in clear to anyone who reaches it", ErrPlaintextExposed, addr)
}

func loopbackHost(host string) bool {
	if host == "" {
		return false
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.IsLoopback()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return false
		}
	}
	return true
}

// Limits bound the connections of the admin port, so that one address
// holding many idle or half-sent connections cannot starve the probes and
// scrapes of the others. The zero value takes the defaults noted.
type Limits struct {
	// MaxConnsPerAddr: open connections from one client IP (default 32;
	// < 0: unlimited). One more is reset at accept, before TLS: a probe
	// from another address is never held up by them.
	MaxConnsPerAddr int
	// MaxConns: open connections, all addresses together (default 1024;
	// < 0: unlimited). One more is reset at accept.
	MaxConns int
	// HeaderTimeout: a connection must complete its TLS handshake and send
	// a whole request within it once it is accepted, and send the rest of
	// a request within it once a kept-alive connection sends its first
	// byte (default 5 s). The admin API takes no bodies, so this is the
	// header timeout.
	HeaderTimeout time.Duration
	// IdleTimeout: a kept-alive connection that sends no next request
	// within it is closed (default 60 s).
	IdleTimeout time.Duration
}

// DefaultLimits are what the zero fields of a Limits take.
var DefaultLimits = Limits{MaxConnsPerAddr: 32, MaxConns: 1024, HeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}

func (l *Limits) fill() {
	if l.MaxConnsPerAddr == 0 {
		l.MaxConnsPerAddr = DefaultLimits.MaxConnsPerAddr
	}
	if l.MaxConns == 0 {
		l.MaxConns = DefaultLimits.MaxConns
	}
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = DefaultLimits.HeaderTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultLimits.IdleTimeout
	}
}

// gate is the admin port's listener under TLS: it counts open connections
// per client IP and in all, and resets a connection over either limit as
// soon as it is accepted. fasthttp's own MaxConnsPerIP is not used: it
// counts IPv4 addresses only (every IPv6 client would be unlimited), and it
// writes its refusal from the accept loop, which on a TLS connection first
// waits for a handshake the client may never send.
type gate struct {
	net.Listener
	limits  Limits
	log     *slog.Logger
	refused atomic.Int64

	mu      sync.Mutex
	open    int
	perAddr map[netip.Addr]int
	logged  time.Time // last refusal logged (at most one line a minute)
}

func newGate(ln net.Listener, limits Limits, log *slog.Logger) *gate {
	return &gate{Listener: ln, limits: limits, log: log, perAddr: map[netip.Addr]int{}}
}

// Accept returns the next connection within the limits; those over them
// are reset (no answer, no TIME_WAIT) and skipped.
func (g *gate) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := remoteIP(c)
		if g.admit(addr) {
			return &gatedConn{Conn: c, g: g, addr: addr}, nil
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
}

func (g *gate) admit(addr netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.perAddr[addr]
	over := ""
	switch {
	case g.limits.MaxConnsPerAddr > 0 && n >= g.limits.MaxConnsPerAddr:
		over = fmt.Sprintf("%d connections from %s (limit %d per address)", n, addr, g.limits.MaxConnsPerAddr)
	case g.limits.MaxConns > 0 && g.open >= g.limits.MaxConns:
		over = fmt.Sprintf("%d connections (limit %d)", g.open, g.limits.MaxConns)
	}
	if over != "" {
		g.refused.Add(1)
		if now := time.Now(); now.Sub(g.logged) >= time.Minute {
			g.logged = now
			g.log.Warn("admin: connections refused", "open", over, "refused_so_far", g.refused.Load())
		}
		return false
	}
	g.perAddr[addr] = n + 1
	g.open++
	return true
}

func (g *gate) release(addr netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open--
	if n := g.perAddr[addr]; n <= 1 {
		delete(g.perAddr, addr)
	} else {
		g.perAddr[addr] = n - 1
	}
}

// gatedConn gives its slot back when it is closed (once, however often
// Close is called).
type gatedConn struct {
	net.Conn
	g    *gate
	addr netip.Addr
	once sync.Once
}

func (c *gatedConn) Close() error {
	c.once.Do(func() { c.g.release(c.addr) })
	return c.Conn.Close()
}

// remoteIP is the client's IP (an IPv4-mapped IPv6 address as IPv4).
func remoteIP(c net.Conn) netip.Addr {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case nil:
		return netip.Addr{}
	}
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}
