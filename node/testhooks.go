package node

import (
	"os"
	"strings"
	"time"

	"github.com/wardenlock/warden/shard"
)

// ClockOffsetEnv names a file holding a duration ("250ms", "-3s"); when set,
// ClockFromEnv returns a clock shifted by that offset, re-read every 100 ms.
// The fault suite (package chaos) uses it to skew nodes' clocks.
const ClockOffsetEnv = "WARDEN_CLOCK_OFFSET_FILE"

// ClockFromEnv returns the clock a served node should use: nil (the system
// clock) unless WARDEN_CLOCK_OFFSET_FILE is set. The polling goroutine lives
// as long as the process, which is what a test-only hook for `warden serve`
// needs.
func ClockFromEnv() shard.Clock {
	path := os.Getenv(ClockOffsetEnv)
	if path == "" {
		return nil
	}
	c := &shard.OffsetClock{}
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
