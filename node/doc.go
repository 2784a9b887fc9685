// Package node assembles one Warden node: the shard host (dragonboat and
// every replica) and the router listening for clients. `warden serve`, `warden
// dev` and the cluster tests all start nodes through it.
package node
