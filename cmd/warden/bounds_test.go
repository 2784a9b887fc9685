package main

import (
	"strings"
	"testing"
)

// TestCLIRefusesOutOfBoundFlags: a numeric flag below its bound is refused
// before the verb runs (no cluster is needed to see it), with the flag and
// its value named; it no longer quietly means a default.
func TestCLIRefusesOutOfBoundFlags(t *testing.T) {
	pc := &procCluster{t: t, endpoints: "127.0.0.1:1"} // nothing listens: no verb may get that far
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"lock", "--ttl", "0", "/x"}, "--ttl 0s: must be positive"},
		{[]string{"lock", "--ttl", "-1s", "/x"}, "--ttl -1s: must be positive"},
		{[]string{"lock", "--wait", "-1s", "/x"}, "--wait -1s: must not be negative"},
		{[]string{"elect", "--ttl", "0", "/e"}, "--ttl 0s: must be positive"},
		{[]string{"sem", "--grace", "-2s", "/s", "2"}, "--grace -2s: must not be negative"},
		{[]string{"lock-all", "--ttl", "-1ms", "/a", "/b"}, "--ttl -1ms: must be positive"},
		{[]string{"kv", "put", "--expect-version", "-2", "/k", "v"}, "--expect-version -2: must be -1 (none) or more"},
		{[]string{"locks", "revoke", "--grace", "-1s", "/x"}, "--grace -1s: must not be negative"},
		{[]string{"--timeout", "0", "status"}, "--timeout 0s: must be positive"},
		{[]string{"bench", "--duration", "0"}, "--duration 0s: must be positive"},
		{[]string{"audit", "--limit", "-5", "/"}, "--limit -5: must not be negative"},
	}
	for _, tc := range cases {
		_, stderr, code := pc.run(t, tc.args...)
		if code != exitFailure || strings.TrimSpace(stderr) != "warden: "+tc.want {
			t.Errorf("warden %s: exit %d, %q; want exit 1 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}
