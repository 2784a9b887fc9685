//go:build !bugs

package testbugs

// Built without the tag `bugs`: no switch can be turned on.
const (
	Enabled             = false
	NoLeaseRefresh      = false
	ReleaseIgnoresToken = false
	GrantExpiredWaiter  = false
)
