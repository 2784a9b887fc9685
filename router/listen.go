package router

import (
	"context"
	"net"
	"time"
)

// Listen opens a client listener for Serve. Go turns TCP keepalive on for
// every accepted connection (four setsockopt calls); during a connection
// flood most accepted connections are refused or never say hello, so the
// listener leaves keepalive off and Serve turns it on only for connections
// that complete their handshake (keepAlive).
func Listen(addr string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1}
	return lc.Listen(context.Background(), "tcp", addr)
}

// keepAlive turns TCP keepalive on for a client that completed its
// handshake (Go's defaults: probes after 15 s idle, every 15 s, 9 of them),
// so a peer that vanished without a FIN is noticed.
func keepAlive(nc net.Conn) {
	if u, ok := nc.(interface{ NetConn() net.Conn }); ok { // TLS
		nc = u.NetConn()
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 15 * time.Second, Count: 9})
	}
}
