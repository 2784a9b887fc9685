// Package testbugs holds test-only switches that deliberately break one of
// Warden's promises, so the fault suite (package chaos) can show it catches
// the breakage. They exist only in a binary built with the build tag
// `bugs`, which reads them once, at start-up, from the environment variable
// WARDEN_TEST_BUGS (a comma-separated list). In every other build they are
// constants false and the compiler removes the code they guard.
package testbugs

// Env is the environment variable a `bugs` build reads the switches from.
const Env = "WARDEN_TEST_BUGS"

// Names lists the known switches, for help texts and the suite.
var Names = []string{"no-lease-refresh", "release-ignores-token", "grant-expired-waiter"}
