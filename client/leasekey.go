package client

import (
	"crypto/rand"
	"encoding/binary"
	"sync"

	"github.com/wardenlock/warden/wire"
)

// A session's lease id is derived from a random key (wire.LeaseID) that
// only this client knows. Requests that may create the lease on a shard
// carry the key, so a shard that has not seen the lease yet can tell its
// owner from an identity that merely read the id from a lock's holders.

// leaseKeys maps the client's live session leases to their keys.
type leaseKeys struct{ m sync.Map } // uint64 -> uint64

// newLeaseKey picks a random key and returns it with the lease id it proves.
func newLeaseKey() (key, lease uint64) {
	var b [8]byte
	for {
		rand.Read(b[:])
		key = binary.BigEndian.Uint64(b[:])
		if lease = wire.LeaseID(key); lease != 0 && key != 0 {
			return key, lease
		}
	}
}

func (k *leaseKeys) add(lease, key uint64) {
	if k != nil {
		k.m.Store(lease, key)
	}
}

func (k *leaseKeys) remove(lease uint64) {
	if k != nil {
		k.m.Delete(lease)
	}
}

// stamp adds the key of r's session lease when r may create the lease on a
// shard (other requests do not need it, and the key goes nowhere else).
func (k *leaseKeys) stamp(r *wire.Request) {
	if k == nil || r.Lease == 0 || r.LeaseKey != 0 || !createsLease(r.Op) {
		return
	}
	if key, ok := k.m.Load(r.Lease); ok {
		r.LeaseKey = key.(uint64)
	}
}

func createsLease(op wire.Op) bool {
	switch op {
	case wire.OpAcquire, wire.OpCampaign, wire.OpAcquireMulti, wire.OpKVPut, wire.OpSession:
		return true
	}
	return false
}
