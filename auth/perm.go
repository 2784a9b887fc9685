package auth

import (
	"fmt"
	"strings"
)

// Perm is a set of permissions a role grants on a path prefix.
type Perm uint8

const (
	// Lock: acquire, release, renew, cancel, campaign, proclaim, resign.
	Lock Perm = 1 << iota
	// Read: lockinfo, listlocks, kv.get, kv.list, leader.
	Read
	// Watch: watch streams.
	Watch
	// KVWrite: kv.put, kv.delete.
	KVWrite
	// Admin: force-release, range moves, node changes (audited).
	Admin
)

var permNames = []struct {
	p    Perm
	name string
}{{Lock, "lock"}, {Read, "read"}, {Watch, "watch"}, {KVWrite, "kv-write"}, {Admin, "admin"}}

// ParsePerm reads one permission name ("lock", "read", "watch", "kv-write",
// "admin") or "all".
func ParsePerm(s string) (Perm, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "all" {
		return Lock | Read | Watch | KVWrite | Admin, nil
	}
	for _, pn := range permNames {
		if pn.name == s {
			return pn.p, nil
		}
	}
	return 0, fmt.Errorf("auth: unknown permission %q (want lock, read, watch, kv-write, admin or all)", s)
}

func (p Perm) String() string {
	var names []string
	for _, pn := range permNames {
		if p&pn.p != 0 {
			names = append(names, pn.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "+")
}
