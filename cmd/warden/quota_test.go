package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"

	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/statemachine"
)

// The per-identity quotas come from their flags, or from the config file's
// quotas section for the flags not given; they reach the router (watches,
// rate) and every shard's state machine (leases, locks, waiters).
func TestQuotasFromFlagsAndConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warden.yaml")
	yaml := "quotas:\n  leases: 7\n  locks: 70\n  waiters: 5\n  watches: 9\n  rate: 250\n  burst: 500\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	apply := func(args ...string) node.Config {
		t.Helper()
		var sec serveSecurity
		f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		sec.register(f)
		if err := f.Parse(append([]string{"--plaintext"}, args...)); err != nil {
			t.Fatal(err)
		}
		cmd := serveCmd()
		var fc fileConfig
		if err := loadFileConfig(path, &fc, cmd); err != nil {
			t.Fatal(err)
		}
		sec.fileQuotas(fc.Quotas, f)
		var cfg node.Config
		if err := sec.apply(&cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := apply()
	if cfg.SM.MaxOwnerLeases != 7 || cfg.SM.MaxOwnerLocks != 70 || cfg.SM.MaxOwnerWaiters != 5 {
		t.Fatalf("state machine quotas from the file: %+v", cfg.SM)
	}
	if s := cfg.Router.Security; s.MaxIdentityWatches != 9 || s.Rate != 250 || s.Burst != 500 {
		t.Fatalf("router quotas from the file: watches %d rate %g burst %d", s.MaxIdentityWatches, s.Rate, s.Burst)
	}
	cfg = apply("--identity-leases", "3", "--rate", "-1")
	if cfg.SM.MaxOwnerLeases != 3 || cfg.SM.MaxOwnerLocks != 70 || cfg.Router.Security.Rate != -1 {
		t.Fatalf("a flag must win over the file: leases %d locks %d rate %g", cfg.SM.MaxOwnerLeases, cfg.SM.MaxOwnerLocks, cfg.Router.Security.Rate)
	}
	// Without a file the defaults are the packages' own.
	var sec serveSecurity
	f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	sec.register(f)
	f.Parse([]string{"--plaintext"})
	var d node.Config
	if err := sec.apply(&d); err != nil {
		t.Fatal(err)
	}
	if def := statemachine.DefaultConfig(); d.SM.MaxOwnerLeases != def.MaxOwnerLeases || d.SM.MaxOwnerLocks != def.MaxOwnerLocks ||
		d.SM.MaxOwnerWaiters != def.MaxOwnerWaiters || d.Router.Security.MaxIdentityWatches != router.DefaultIdentityWatches {
		t.Fatalf("defaults: %+v, watches %d", d.SM, d.Router.Security.MaxIdentityWatches)
	}
}
