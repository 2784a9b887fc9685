package wire

// Codes of the placement surface (range moves, replica moves), 55–59.
const (
	// Superseded: a newer copy of this waiting request (same Client and
	// Seq) reached the shard and took its place; the newer copy gets the
	// request's answer. A router that kept retrying after its client
	// connection broke races the client's own re-sent copy, so a client
	// that hears Superseded for a request it still waits on sends it again
	// (same Seq): that copy re-attaches to the waiter, or gets its grant.
	// Not retryable by routers: the copy a router holds is the stale one.
	Superseded Code = 55
)

func init() {
	codeNames[Superseded] = "superseded"
}
