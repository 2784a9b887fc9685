// Package leasetrace is the switch for the per-lease decision trace: every
// lessor decision (track, refresh, checkpoint, tick pop, expiry outcome,
// keepalive answer) and every keepalive sub-request a router fans out, logged
// at Info with the message prefix "lease trace". It is read once, at
// start-up, from WARDEN_LEASE_TRACE (any non-empty value turns it on); off,
// every trace point costs one bool check. For fault hunting only: on a busy
// node it logs several lines per keepalive.
package leasetrace

import (
	"os"
	"time"
)

// Env is the environment variable the switch is read from.
const Env = "WARDEN_LEASE_TRACE"

// On turns the trace on. Tests may set it before the code under test runs.
var On = os.Getenv(Env) != ""

// Time formats a trace time with microseconds (slog's default keeps
// milliseconds, too coarse to compare a deadline with a send).
func Time(t time.Time) string { return t.UTC().Format("15:04:05.000000") }
