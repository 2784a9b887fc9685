package wire

import (
	"crypto/sha256"
	"encoding/binary"
)

// Session lease ids are derived from a secret key the client keeps:
// LeaseID(key) is the first 8 bytes of SHA-256("warden-lease-v1\x00" ||
// be64(key)) with the top bit cleared (ids with the top bit set are the
// server's single-lock leases). A shard creating a lease for an
// authenticated identity checks Request.LeaseKey against the id, so knowing
// a lease id (anyone who reads a lock's holders does) is not enough to open
// it: finding a key for a given id is a 63-bit preimage search.

const leaseDomain = "warden-lease-v1\x00"

// singleLeaseBit is set in the ids of single-lock leases, which the server
// makes (statemachine.SingleLeaseBit), and clear in session lease ids.
const singleLeaseBit uint64 = 1 << 63

// SingleLease reports whether id names a single-lock lease (one the server
// made for a lock acquired without a session).
func SingleLease(id uint64) bool { return id&singleLeaseBit != 0 }

// LeaseID is the session lease id that key proves. It is 0 (no lease) for
// a handful of keys; pick another key then.
func LeaseID(key uint64) uint64 {
	var b [len(leaseDomain) + 8]byte
	copy(b[:], leaseDomain)
	binary.BigEndian.PutUint64(b[len(leaseDomain):], key)
	sum := sha256.Sum256(b[:])
	return binary.BigEndian.Uint64(sum[:8]) &^ singleLeaseBit
}
