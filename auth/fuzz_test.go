package auth

import (
	"testing"
)

// FuzzParse feeds arbitrary YAML to the policy parser: it must refuse or
// build a policy, never panic, and a built policy must answer queries.
func FuzzParse(f *testing.F) {
	f.Add([]byte(examplePolicyText()))
	f.Add([]byte("roles: {r: [{prefix: /, perms: [all]}]}\nidentities: {a: [r]}\ntokens: {t: a}"))
	f.Add([]byte("identities: {a: []}"))
	f.Add([]byte("&a [*a, *a]"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		for _, path := range []string{"/", "/a", "/a/b/c"} {
			p.Allowed("a", Lock, path)
		}
		p.Token("t")
	})
}
