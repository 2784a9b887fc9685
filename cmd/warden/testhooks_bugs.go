//go:build bugs

package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/wardenlock/warden/internal/testbugs"
	"github.com/wardenlock/warden/lease"
)

// A binary built with the tag `bugs` is for the fault suite (package chaos)
// only: it honours the test bug switches (internal/testbugs) and a clock
// offset file, and says so on stderr when it serves.

// clockOffsetEnv names a file holding a duration ("250ms", "-3s"); when set,
// testClock returns a clock shifted by that offset, re-read every 100 ms.
// The fault suite uses it to skew nodes' clocks.
const clockOffsetEnv = "WARDEN_CLOCK_OFFSET_FILE"

// testClock returns the clock a served node uses: nil (the system clock)
// unless WARDEN_CLOCK_OFFSET_FILE is set. The polling goroutine lives as
// long as the process.
func testClock() lease.Clock {
	fmt.Fprintf(os.Stderr, "warden: a test build (tag bugs): %s=%q, %s=%q\n",
		testbugs.Env, os.Getenv(testbugs.Env), clockOffsetEnv, os.Getenv(clockOffsetEnv))
	path := os.Getenv(clockOffsetEnv)
	if path == "" {
		return nil
	}
	c := &lease.OffsetClock{}
	read := func() {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
			c.Set(d)
		}
	}
	read()
	go func() {
		for range time.Tick(100 * time.Millisecond) {
			read()
		}
	}()
	return c
}
