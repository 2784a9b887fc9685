package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

const examplePolicy = `
tokens:
  alice-token: alice
  "sha256:%s": ci
identities:
  alice: [billing-locker]
  ci: [reader, deployer]
  root: [admin]
roles:
  billing-locker:
    - {prefix: /locks/billing, perms: [lock, read, watch]}
  reader:
    - {prefix: /, perms: [read]}
  deployer:
    - {prefix: /locks/deploy/prod, perms: [lock]}
    - {prefix: /config/deploy, perms: [kv-write, watch]}
  admin:
    - {prefix: /, perms: [all]}
peer-secret: s3cret
`

func examplePolicyText() string {
	sum := sha256.Sum256([]byte("ci-token"))
	return strings.Replace(examplePolicy, "%s", hex.EncodeToString(sum[:]), 1)
}

func mustParse(t *testing.T, s string) *Policy {
	t.Helper()
	p, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTokens(t *testing.T) {
	p := mustParse(t, examplePolicyText())
	for _, tc := range []struct {
		name, token, want string
		ok                bool
	}{
		{"plain token", "alice-token", "alice", true},
		{"hashed token", "ci-token", "ci", true},
		{"the digest itself is not a token", "sha256:" + strings.Repeat("0", 64), "", false},
		{"unknown", "mallory", "", false},
		{"empty", "", "", false},
		{"prefix of a token", "alice-tok", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := p.Token(tc.token)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Token(%q) = %q, %v; want %q, %v", tc.token, got, ok, tc.want, tc.ok)
			}
		})
	}
	if p.PeerSecret() != "s3cret" {
		t.Fatalf("peer secret %q", p.PeerSecret())
	}
}

func TestAllowed(t *testing.T) {
	p := mustParse(t, examplePolicyText())
	for _, tc := range []struct {
		name     string
		identity string
		perm     Perm
		path     string
		want     bool
	}{
		{"grant on the prefix itself", "alice", Lock, "/locks/billing", true},
		{"grant covers the subtree", "alice", Lock, "/locks/billing/job-7/part", true},
		{"segment boundary: billingX is not under billing", "alice", Lock, "/locks/billingX", false},
		{"an ancestor needs a grant on it or above", "alice", Lock, "/locks", false},
		{"root", "alice", Read, "/", false},
		{"perm not granted", "alice", KVWrite, "/locks/billing/a", false},
		{"roles merge", "ci", Read, "/locks/deploy/prod", true},
		{"second role", "ci", Lock, "/locks/deploy/prod/web", true},
		{"sibling of a grant", "ci", Lock, "/locks/deploy/staging", false},
		{"two perms at once need both", "ci", Lock | Read, "/locks/deploy/prod", false},
		{"admin everywhere", "root", Admin, "/locks/x", true},
		{"unknown identity", "mallory", Read, "/", false},
		{"empty identity", "", Read, "/", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Allowed(tc.identity, tc.perm, tc.path); got != tc.want {
				t.Fatalf("Allowed(%s, %v, %s) = %v, want %v", tc.identity, tc.perm, tc.path, got, tc.want)
			}
		})
	}
	var nilPolicy *Policy
	if nilPolicy.Allowed("root", Read, "/") {
		t.Fatal("a nil policy allows nothing")
	}
}

func TestParseRefusesMistakes(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", "rolez: {}", "rolez"},
		{"unknown perm", "roles: {r: [{prefix: /a, perms: [write]}]}", "unknown permission"},
		{"relative prefix", "roles: {r: [{prefix: a, perms: [read]}]}", "prefix"},
		{"no perms", "roles: {r: [{prefix: /a}]}", "no perms"},
		{"unknown role", "identities: {a: [nope]}", "unknown role"},
		{"token for unknown identity", "tokens: {t: ghost}", "not under identities"},
		{"bad digest", "identities: {a: []}\ntokens: {\"sha256:zz\": a}", "64 hex"},
		{"not yaml", "{[", "policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	p := mustParse(t, "")
	if p.Allowed("anyone", Read, "/") {
		t.Fatal("an empty policy must deny everything")
	}
}

func TestPermNames(t *testing.T) {
	all, err := ParsePerm("all")
	if err != nil || all.String() != "lock+read+watch+kv-write+admin" {
		t.Fatalf("all = %v, %v", all, err)
	}
	if p, err := ParsePerm(" KV-Write "); err != nil || p != KVWrite {
		t.Fatalf("kv-write = %v, %v", p, err)
	}
}

// TestIdentify: the one way every port turns credentials into an identity.
func TestIdentify(t *testing.T) {
	p := mustParse(t, examplePolicyText())
	for _, tc := range []struct {
		name, token, cert, want string
		err                     error
	}{
		{"token", "alice-token", "", "alice", nil},
		{"certificate", "", "root", "root", nil},
		{"a token wins over the certificate", "ci-token", "root", "ci", nil},
		{"an unknown token is refused whatever the certificate", "guess", "root", "", ErrUnknownToken},
		{"certificate identity without roles", "", "mallory", "", ErrNoRoles},
		{"nothing", "", "", "", ErrNoCredentials},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Identify(tc.token, tc.cert)
			if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("Identify(%q, %q) = %q, %v; want %q, %v", tc.token, tc.cert, got, err, tc.want, tc.err)
			}
		})
	}
}
