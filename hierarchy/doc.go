// Package hierarchy holds Warden's path rules and the path trie: normalised
// paths, their routing keys, and a trie whose nodes carry lock and queue
// counters for their own node and for their whole subtree, so that deciding
// whether a hierarchical lock conflicts costs O(depth), never a scan.
//
// The trie is a pure data structure: no time, no I/O, no goroutines. It does
// not know what a holder or a waiter is; it stores a caller-defined payload
// per node (Node.Val) and the counters the caller keeps in step with it.
package hierarchy
