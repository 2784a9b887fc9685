// Package testbugs holds test-only switches that deliberately break one of
// Warden's promises, so the fault suite (package chaos) can show it catches
// the breakage. They are read once, at start-up, from the environment
// variable WARDEN_TEST_BUGS (a comma-separated list); when it is unset every
// switch is false and costs one bool check.
package testbugs

import (
	"os"
	"strings"
)

// Env is the environment variable the switches are read from.
const Env = "WARDEN_TEST_BUGS"

// The switches. Never set them in production.
var (
	// NoLeaseRefresh: a new shard leader does not give leases a fresh TTL
	// (they are due at once), breaking promise 3.
	NoLeaseRefresh bool
	// ReleaseIgnoresToken: release frees the path whatever token it carries,
	// so a stale holder can release a newer holder's lock.
	ReleaseIgnoresToken bool
	// GrantExpiredWaiter: when a lease ends, its own waiters are not
	// withdrawn before the hand-off, so one of them can be granted the lock
	// the ending lease gave up.
	GrantExpiredWaiter bool
)

// Names lists the known switches, for help texts and the suite.
var Names = []string{"no-lease-refresh", "release-ignores-token", "grant-expired-waiter"}

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
