//go:build bugs

package testbugs

import (
	"os"
	"strings"
)

// Enabled says this binary was built with the switches (tag `bugs`).
const Enabled = true

// The switches, read from Env at start-up.
var (
	// NoLeaseRefresh: a new shard leader does not give leases a fresh TTL
	// (they are due at once).
	NoLeaseRefresh bool
	// ReleaseIgnoresToken: release frees the path whatever token it carries,
	// so a stale holder can release a newer holder's lock.
	ReleaseIgnoresToken bool
	// GrantExpiredWaiter: when a lease ends, its own waiters are not
	// withdrawn before the hand-off, so one of them can be granted the lock
	// the ending lease gave up.
	GrantExpiredWaiter bool
)

func init() { Parse(os.Getenv(Env)) }

// Parse sets the switches from a comma-separated list and returns the
// names it did not know.
func Parse(list string) (unknown []string) {
	for _, name := range strings.Split(list, ",") {
		switch strings.TrimSpace(name) {
		case "":
		case "no-lease-refresh":
			NoLeaseRefresh = true
		case "release-ignores-token":
			ReleaseIgnoresToken = true
		case "grant-expired-waiter":
			GrantExpiredWaiter = true
		default:
			unknown = append(unknown, name)
		}
	}
	return unknown
}
