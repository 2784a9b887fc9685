package statemachine

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/wardenlock/warden/wire"
)

// Lease owners. A lease id is known to anyone who reads a lock's holders,
// so with authentication on a session lease is bound to the identity that
// created it: the router stamps the connection's proven identity on every
// lease-bearing request (wire.Request.Identity; never taken from a client),
// and only that identity may acquire under the lease, attach keys to it,
// keep it alive or revoke it. Requests without an identity are the
// server's own (expiry) or come from a cluster without auth; they are not
// checked, and a lease created without an identity stays unbound.

// checkOwner refuses r on a lease bound to another identity.
func checkOwner(l *lease, r *wire.Request) *wire.Error {
	if l.owner == "" || r.Identity == "" || l.owner == r.Identity {
		return nil
	}
	return wire.Errorf(wire.Unauthorized, "lease %d belongs to another identity, not %q", l.id, r.Identity)
}

// ownerOK is checkOwner for the lessor's keepalive check (LeaseCheck).
func (s *StateMachine) ownerOK(id uint64, identity string) bool {
	l := s.leases[id]
	return l == nil || l.owner == "" || identity == "" || l.owner == identity
}

// identities interns identity strings across the process (not replicated:
// only memory is shared).
var (
	identityMu sync.Mutex
	identities = map[string]string{}
)

// internIdentity copies an identity out of the entry being applied; a
// handful of identities own many leases, so one copy of each is kept.
func internIdentity(id string) string {
	if id == "" {
		return ""
	}
	identityMu.Lock()
	defer identityMu.Unlock()
	if v, ok := identities[id]; ok {
		return v
	}
	v := strings.Clone(id)
	if len(identities) < 4096 {
		identities[v] = v
	}
	return v
}

// Snapshot section 40 (security): the owners of bound leases, by lease id.
const sectionLeaseOwners = 40

func init() {
	registerSection(snapSection{tag: sectionLeaseOwners, name: "lease owners", save: saveLeaseOwners, load: loadLeaseOwners})
}

func saveLeaseOwners(s *StateMachine, w *snapWriter) {
	var ids []uint64
	for id, l := range s.leases {
		if l.owner != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	w.uvarint(uint64(len(ids)))
	for _, id := range ids {
		w.uvarint(id)
		w.str(s.leases[id].owner)
	}
}

func loadLeaseOwners(c *recovery) {
	r := c.r
	for n := r.count(uint64(len(c.leases))); n > 0 && r.err == nil; n-- {
		id, owner := r.uvarint(), r.str()
		l := c.leases[id]
		switch {
		case r.err != nil:
			return
		case l == nil:
			r.fail(fmt.Errorf("owner recorded for unknown lease %d", id))
		case owner == "":
			r.fail(fmt.Errorf("empty owner recorded for lease %d", id))
		default:
			l.owner = internIdentity(owner)
		}
	}
}
