package fence

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Signed is a fencing token with the cluster's signature, as a lock holder
// hands it to a resource.
type Signed struct {
	Path   string
	Token  uint64
	Shard  uint64
	Expiry time.Time
	Sig    []byte
}

// FromGrant assembles a Signed from a grant's fields.
func FromGrant(path string, token uint64, g *wire.SignedGrant) (Signed, error) {
	if g == nil {
		return Signed{}, errors.New("fence: the grant carries no signature (ask with signing on, and give the cluster a signing key)")
	}
	return Signed{Path: path, Token: token, Shard: g.Shard, Expiry: time.UnixMilli(g.Expiry), Sig: g.Sig}, nil
}

// ErrBadSignature and ErrExpired are returned by Verifier.Verify.
var (
	ErrBadSignature = errors.New("fence: signature does not verify")
	ErrExpired      = errors.New("fence: signed token has expired")
)

// Verifier checks signed tokens offline and fences them with a Guard.
type Verifier struct {
	Key   ed25519.PublicKey
	Guard *Guard           // optional: also enforce token order
	Now   func() time.Time // the resource's clock (default time.Now)
}

// Verify checks the signature and expiry, then (with a Guard) the order.
func (v *Verifier) Verify(s Signed) error {
	msg := wire.SignedMessage(s.Path, s.Token, s.Shard, s.Expiry.UnixMilli())
	if len(v.Key) != ed25519.PublicKeySize || !ed25519.Verify(v.Key, msg, s.Sig) {
		return ErrBadSignature
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if now().After(s.Expiry) {
		return fmt.Errorf("%w: at %s", ErrExpired, s.Expiry.Format(time.RFC3339Nano))
	}
	if v.Guard != nil {
		return v.Guard.Check(s.Path, s.Token)
	}
	return nil
}
