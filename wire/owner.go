package wire

import (
	"crypto/sha256"
	"encoding/binary"
)

// Client ids are owned by identities. With authentication on, the router
// replaces the Client a connection sends with OwnedClient(identity, Client)
// before anything is routed, so every exactly-once record, parked wait and
// cancel is keyed by an id that only that identity can produce: another
// identity that learns the id (from a lock's waiters, say) sends it through
// its own router and reaches OwnedClient(itself, id), a different client.
// Producing a given owned id from another identity is a 64-bit preimage
// search. Without authentication every client is in one trust domain and
// the Client is used as sent.

const clientDomain = "warden-client-v1\x00"

// OwnedClient is the client id the service uses for client id c of
// identity. It is never 0.
func OwnedClient(identity string, c uint64) uint64 {
	h := sha256.New()
	var b [8]byte
	h.Write([]byte(clientDomain))
	h.Write([]byte(identity))
	binary.BigEndian.PutUint64(b[:], c)
	h.Write([]byte{0})
	h.Write(b[:])
	var sum [sha256.Size]byte
	if id := binary.BigEndian.Uint64(h.Sum(sum[:0])[:8]); id != 0 {
		return id
	}
	return 1
}
