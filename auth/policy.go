package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/wardenlock/warden/hierarchy"
)

// File is the YAML form of a policy (`warden serve --auth-config`):
//
//	tokens:            # bearer token (or "sha256:<hex digest of it>") -> identity
//	  "sha256:9f86...": ci
//	identities:        # identity (token name, certificate CN or URI SAN) -> roles
//	  ci: [deployer]
//	roles:             # role -> grants
//	  deployer:
//	    - {prefix: /locks/deploy, perms: [lock, read, watch]}
//	peer-secret: "..." # optional: authenticates node-to-node connections without mTLS
type File struct {
	Tokens     map[string]string     `yaml:"tokens"`
	Identities map[string][]string   `yaml:"identities"`
	Roles      map[string][]GrantDef `yaml:"roles"`
	PeerSecret string                `yaml:"peer-secret"`
}

// GrantDef is one grant of a role: perms on prefix and its whole subtree.
type GrantDef struct {
	Prefix string   `yaml:"prefix"`
	Perms  []string `yaml:"perms"`
}

// Policy answers "may identity do perm on path". It is immutable once
// built and safe for concurrent use.
type Policy struct {
	tokens     map[[sha256.Size]byte]string
	grants     map[string]map[string]Perm // identity -> prefix -> perms (roles merged)
	peerSecret string
}

// Limits on a policy file, so a hostile or broken file cannot make a node
// allocate without bound.
const (
	maxPolicyBytes = 4 << 20
	maxTokenBytes  = 4096
)

// Load reads and parses a policy file.
func Load(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	p, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Parse builds a policy from YAML. Unknown keys, unknown permissions,
// invalid prefixes, roles that do not exist and identities without roles are
// errors: a typo must not silently grant or deny.
func Parse(b []byte) (*Policy, error) {
	if len(b) > maxPolicyBytes {
		return nil, fmt.Errorf("auth: policy is %d bytes, over %d", len(b), maxPolicyBytes)
	}
	var f File
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	// An empty document is an empty policy, which denies everything.
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("auth: policy: %w", err)
	}
	return Build(f)
}

// Build checks a File and turns it into a Policy.
func Build(f File) (*Policy, error) {
	p := &Policy{tokens: map[[sha256.Size]byte]string{}, grants: map[string]map[string]Perm{}, peerSecret: f.PeerSecret}
	roles := map[string]map[string]Perm{}
	for _, name := range sortedKeys(f.Roles) {
		m := map[string]Perm{}
		for i, g := range f.Roles[name] {
			if err := hierarchy.Validate(g.Prefix, hierarchy.Limits{}); err != nil {
				return nil, fmt.Errorf("auth: role %q grant %d: prefix: %w", name, i, err)
			}
			if len(g.Perms) == 0 {
				return nil, fmt.Errorf("auth: role %q grant %d on %s has no perms", name, i, g.Prefix)
			}
			for _, s := range g.Perms {
				perm, err := ParsePerm(s)
				if err != nil {
					return nil, fmt.Errorf("auth: role %q: %w", name, err)
				}
				m[g.Prefix] |= perm
			}
		}
		roles[name] = m
	}
	for _, id := range sortedKeys(f.Identities) {
		if id == "" {
			return nil, errors.New("auth: empty identity name")
		}
		m := map[string]Perm{}
		for _, r := range f.Identities[id] {
			grants, ok := roles[r]
			if !ok {
				return nil, fmt.Errorf("auth: identity %q has unknown role %q", id, r)
			}
			for prefix, perm := range grants {
				m[prefix] |= perm
			}
		}
		p.grants[id] = m
	}
	for _, tok := range sortedKeys(f.Tokens) {
		id := f.Tokens[tok]
		if _, ok := p.grants[id]; !ok {
			return nil, fmt.Errorf("auth: a token names identity %q, which is not under identities", id)
		}
		digest, err := tokenDigest(tok)
		if err != nil {
			return nil, err
		}
		if other, dup := p.tokens[digest]; dup && other != id {
			return nil, fmt.Errorf("auth: one token names two identities (%q and %q)", other, id)
		}
		p.tokens[digest] = id
	}
	return p, nil
}

func tokenDigest(tok string) ([sha256.Size]byte, error) {
	var d [sha256.Size]byte
	if hexed, ok := strings.CutPrefix(tok, "sha256:"); ok {
		b, err := hex.DecodeString(hexed)
		if err != nil || len(b) != sha256.Size {
			return d, fmt.Errorf("auth: token %q: want sha256: and 64 hex digits", tok)
		}
		copy(d[:], b)
		return d, nil
	}
	if tok == "" || len(tok) > maxTokenBytes {
		return d, fmt.Errorf("auth: tokens must be 1..%d bytes", maxTokenBytes)
	}
	return sha256.Sum256([]byte(tok)), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Token returns the identity a bearer token names. The token is hashed
// first and the digest looked up, so the comparison takes the same time
// whatever prefix of a valid token a guesser has found.
func (p *Policy) Token(tok string) (string, bool) {
	if p == nil || tok == "" || len(tok) > maxTokenBytes {
		return "", false
	}
	id, ok := p.tokens[sha256.Sum256([]byte(tok))]
	return id, ok
}

// Errors of Identify: the caller proved no identity the policy knows.
var (
	ErrNoCredentials = errors.New("auth: credentials required: a client certificate or a token")
	ErrUnknownToken  = errors.New("auth: unknown token")
	ErrNoRoles       = errors.New("auth: identity has no roles")
)

// Identify is the identity a caller proves, the same way on every port: the
// one its bearer token names when it sends a token (an unknown token is
// refused, whatever certificate comes with it), else the identity of its
// verified client certificate (IdentityFromCert), which must have roles.
func (p *Policy) Identify(token, certIdentity string) (string, error) {
	switch {
	case token != "":
		id, ok := p.Token(token)
		if !ok {
			return "", ErrUnknownToken
		}
		return id, nil
	case certIdentity != "":
		if !p.Known(certIdentity) {
			return "", fmt.Errorf("%w: certificate identity %q", ErrNoRoles, certIdentity)
		}
		return certIdentity, nil
	}
	return "", ErrNoCredentials
}

// Known reports whether identity is named in the policy (has roles).
func (p *Policy) Known(identity string) bool {
	if p == nil {
		return false
	}
	_, ok := p.grants[identity]
	return ok
}

// PeerSecret is the cluster secret from the file ("" when none).
func (p *Policy) PeerSecret() string {
	if p == nil {
		return ""
	}
	return p.peerSecret
}

// Allowed reports whether identity holds perm on path, i.e. some role grants
// perm on path itself or on one of its ancestors. A grant on a prefix covers
// the prefix's whole subtree, and only a grant there (or above) covers
// everything a lock on path blocks; a grant on a descendant never does.
// Prefixes match whole segments: /a/b covers /a/b/c, not /a/bc.
func (p *Policy) Allowed(identity string, perm Perm, path string) bool {
	if p == nil {
		return false
	}
	grants := p.grants[identity]
	if len(grants) == 0 {
		return false
	}
	for q := path; ; q = parent(q) {
		if grants[q]&perm == perm {
			return true
		}
		if q == "/" || q == "" {
			return false
		}
	}
}

// parent of a normalised path: /a/b -> /a, /a -> /.
func parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}
