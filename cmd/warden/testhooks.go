//go:build !bugs

package main

import "github.com/wardenlock/warden/lease"

// testClock is nil, the system clock: only a test build (tag bugs) can
// shift a node's clock.
func testClock() lease.Clock { return nil }
