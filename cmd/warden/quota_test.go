package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/statemachine"
)

// The per-identity quotas come from their flags, or from the config file
// (here in an identity section) for the flags not given; they reach the
// router (watches, rate) and every shard's state machine (leases, locks,
// waiters).
func TestQuotasFromFlagsAndConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warden.yaml")
	yaml := "identity:\n  leases: 7\n  locks: 70\n  waiters: 5\n  watches: 9\nrate: 250\nburst: 500\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := serveConfig(t, []string{"--plaintext", "--config", path})
	if cfg.SM.MaxOwnerLeases != 7 || cfg.SM.MaxOwnerLocks != 70 || cfg.SM.MaxOwnerWaiters != 5 {
		t.Fatalf("state machine quotas from the file: %+v", cfg.SM)
	}
	if s := cfg.Router.Security; s.MaxIdentityWatches != 9 || s.Rate != 250 || s.Burst != 500 {
		t.Fatalf("router quotas from the file: watches %d rate %g burst %d", s.MaxIdentityWatches, s.Rate, s.Burst)
	}
	cfg = serveConfig(t, []string{"--plaintext", "--config", path, "--identity-leases", "3", "--rate", "-1"})
	if cfg.SM.MaxOwnerLeases != 3 || cfg.SM.MaxOwnerLocks != 70 || cfg.Router.Security.Rate != -1 {
		t.Fatalf("a flag must win over the file: leases %d locks %d rate %g", cfg.SM.MaxOwnerLeases, cfg.SM.MaxOwnerLocks, cfg.Router.Security.Rate)
	}
	// Without a file the defaults are the packages' own.
	d := serveConfig(t, []string{"--plaintext"})
	if def := statemachine.DefaultConfig(); d.SM.MaxOwnerLeases != def.MaxOwnerLeases || d.SM.MaxOwnerLocks != def.MaxOwnerLocks ||
		d.SM.MaxOwnerWaiters != def.MaxOwnerWaiters || d.Router.Security.MaxIdentityWatches != router.DefaultIdentityWatches {
		t.Fatalf("defaults: %+v, watches %d", d.SM, d.Router.Security.MaxIdentityWatches)
	}
}
