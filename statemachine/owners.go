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
// checked, and a lease created without an identity stays unbound. Binding
// at first use holds on every shard because creating a lease with an
// identity needs the lease's key (checkLeaseKey), which only its client has.

// checkLeaseKey refuses to create lease r.Lease for an identity that cannot
// prove the id (wire.LeaseID): binding at first use alone would let an
// identity that read the id from a lock's holders open it first on a shard
// its owner has not touched yet, and lock the owner out there. Only the
// session's client knows the key, so the first use on every shard is the
// owner's. Requests without an identity (auth off, the server's own) are
// not checked.
func checkLeaseKey(r *wire.Request) *wire.Error {
	if r.Identity == "" || wire.LeaseID(r.LeaseKey) == r.Lease {
		return nil
	}
	if r.LeaseKey == 0 {
		return wire.Errorf(wire.Unauthorized, "lease %x is new on this shard: creating it needs its key (LeaseKey), which %q did not send", r.Lease, r.Identity)
	}
	return wire.Errorf(wire.Unauthorized, "lease %x is new on this shard and the key %q sent does not prove it", r.Lease, r.Identity)
}

// checkOwner refuses r on a lease bound to another identity.
func checkOwner(l *lease, r *wire.Request) *wire.Error {
	if l.owner == "" || r.Identity == "" || l.owner == r.Identity {
		return nil
	}
	return wire.Errorf(wire.Unauthorized, "lease %x belongs to another identity, not %q", l.id, r.Identity)
}

// singleIdentity is the identity a single-lock lease made by r is bound
// to: r's, when r makes one (no session lease).
func singleIdentity(r *wire.Request) string {
	if r.Lease != 0 || r.Identity == "" {
		return ""
	}
	return internIdentity(r.Identity)
}

// tokenHolder finds the holder of r.Path that r.Token names and checks that
// r's identity may act for it.
func (s *StateMachine) tokenHolder(r *wire.Request) (*lockNode, *holder, *wire.Error) {
	n := s.trie.Find(r.Path)
	h := holderByToken(n, r.Token)
	if h == nil {
		return n, nil, s.tokenError(r.Token, r.Path)
	}
	if err := s.checkHolder(h, r); err != nil {
		return n, nil, err
	}
	return n, h, nil
}

// checkHolder refuses r, which names holder h by its token (release,
// resign, renew, proclaim, hand-over), when h's lease is bound to another
// identity: a token is visible to anyone who may read the lock, so holding
// it proves nothing. Single-lock leases are bound to the identity that
// acquired them (singleOwn), session leases to their creator.
func (s *StateMachine) checkHolder(h *holder, r *wire.Request) *wire.Error {
	if r.Identity == "" {
		return nil
	}
	owner := ""
	if h.single {
		if len(s.singleOwn) > 0 {
			owner = s.singleOwn[h.token]
		}
	} else if l := s.leases[h.lw]; l != nil {
		owner = l.owner
	}
	if owner == "" || owner == r.Identity {
		return nil
	}
	return wire.Errorf(wire.Unauthorized, "token %d on %s belongs to another identity's lease, not %q", h.token, h.node.Path(), r.Identity)
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

// Snapshot section 41 (security): the identities single-lock leases are
// bound to, by holder token (with the path, to find the holder) and by the
// arrival of queued single-lock acquires.
const sectionSingleOwners = 41

func init() {
	registerSection(snapSection{tag: sectionLeaseOwners, name: "lease owners", save: saveLeaseOwners, load: loadLeaseOwners})
	registerSection(snapSection{tag: sectionSingleOwners, name: "single-lock owners", save: saveSingleOwners, load: loadSingleOwners})
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
			r.fail(fmt.Errorf("owner recorded for unknown lease %x", id))
		case owner == "":
			r.fail(fmt.Errorf("empty owner recorded for lease %x", id))
		default:
			l.owner = internIdentity(owner)
		}
	}
}

func saveSingleOwners(s *StateMachine, w *snapWriter) {
	tokens := sortedKeys(s.singleOwn)
	w.uvarint(uint64(len(tokens)))
	for _, t := range tokens {
		w.uvarint(t)
		w.str(s.singles.get(t).node.Path())
		w.str(s.singleOwn[t])
	}
	arrivals := sortedKeys(s.waitOwn)
	w.uvarint(uint64(len(arrivals)))
	for _, a := range arrivals {
		w.uvarint(a)
		w.str(s.waitOwn[a])
	}
}

func loadSingleOwners(c *recovery) {
	r := c.r
	for n := r.count(uint64(c.singles.n)); n > 0 && r.err == nil; n-- {
		token, path, owner := r.uvarint(), r.str(), r.str()
		if r.err != nil {
			return
		}
		if h := holderByToken(c.trie.Find(path), token); h == nil || !h.single || owner == "" {
			r.fail(fmt.Errorf("owner %q recorded for token %d of %s, which is no single-lock holder there", owner, token, path))
			return
		}
		c.singleOwn[token] = internIdentity(owner)
	}
	for n := r.count(uint64(c.nWaiters)); n > 0 && r.err == nil; n-- {
		arrival, owner := r.uvarint(), r.str()
		if r.err == nil && owner == "" {
			r.fail(fmt.Errorf("empty owner recorded for waiter %d", arrival))
		}
		if r.err == nil {
			c.waitOwn[arrival] = internIdentity(owner)
		}
	}
}
