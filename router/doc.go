// Package router is Warden's stateless front door: it accepts client
// connections, routes each request to the shard that owns its key (a local
// replica, or the leader's node over a peer connection), retries routing and
// availability errors, and streams pushed events back.
package router
