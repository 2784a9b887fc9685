package router

import (
	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/wire"
)

// Client ids belong to identities. With auth on, a request's Client is
// replaced with wire.OwnedClient(identity, Client) before it is routed, so
// the exactly-once records, parked waits and cancels behind it are the
// identity's alone, whatever number it sends. Forwarding (peer)
// connections carry the owned id from the first router.

// ownedClient is the owned id of client id raw of this connection's
// identity (reader goroutine only).
func (c *conn) ownedClient(raw uint64) uint64 {
	if raw != c.sec.lastClient || c.sec.lastOwned == 0 {
		c.sec.lastClient, c.sec.lastOwned = raw, wire.OwnedClient(c.sec.identity, raw)
	}
	return c.sec.lastOwned
}

// hidesClients reports whether answers and events about path shown to this
// connection leave out other clients' ids and sequence numbers: with auth
// on, they are shown only to an identity with the admin permission on the
// path. An owned id is useless to another identity, but it still tells
// who waits, and how busy a client is.
func (c *conn) hidesClients(path string) bool {
	pol := c.s.policy()
	return pol != nil && !c.peer && !pol.Allowed(c.sec.identity, auth.Admin, path)
}

// hideWaiterClients clears the Client and Seq of the waiters that are not
// this connection's own client's.
func (c *conn) hideWaiterClients(ws []wire.Waiter) {
	own := c.sec.helloOwned.Load()
	for i := range ws {
		if ws[i].Client != own {
			ws[i].Client, ws[i].Seq = 0, 0
		}
	}
}

// hideEventClients returns events without other clients' ids and sequence
// numbers: the slice itself when none carries one, else a copy (the feed
// shares its slices between subscribers).
func (c *conn) hideEventClients(events []wire.Event) []wire.Event {
	own := c.sec.helloOwned.Load()
	var out []wire.Event
	for i := range events {
		if events[i].Client == 0 || events[i].Client == own {
			continue
		}
		if out == nil {
			out = append([]wire.Event(nil), events...)
		}
		out[i].Client, out[i].Seq = 0, 0
	}
	if out == nil {
		return events
	}
	return out
}
