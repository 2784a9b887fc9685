package fence

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/wardenlock/warden/wire"
)

// Signed is a fencing token with the cluster's signature, as a lock holder
// hands it to a resource. A valid signature says: the cluster granted Token
// on Path, served by Shard, in Mode (Shared with Permits > 0: one permit of
// a semaphore of that many), and the lease it was granted under had no
// deadline later than Expiry when the grant was answered. It does not say
// the hold is still alive: it may have been released, revoked or expired
// since (the fencing order, a Guard, catches a newer holder), and a lease
// kept alive lives past Expiry without a new signature.
type Signed struct {
	Path    string
	Token   uint64
	Shard   uint64
	Expiry  time.Time
	Mode    wire.Mode // wire.Exclusive or wire.Shared
	Permits uint32    // > 0: a semaphore permit
	Sig     []byte
}

// FromGrant assembles a Signed from a grant's fields.
func FromGrant(path string, token uint64, g *wire.SignedGrant) (Signed, error) {
	if g == nil {
		return Signed{}, errors.New("fence: the grant carries no signature (ask with signing on, and give the cluster a signing key)")
	}
	return Signed{Path: path, Token: token, Shard: g.Shard, Expiry: time.UnixMilli(g.Expiry), Mode: g.Mode,
		Permits: g.Permits, Sig: g.Sig}, nil
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
// A resource that only accepts exclusive holders checks s.Mode itself (or
// uses VerifyExclusive).
func (v *Verifier) Verify(s Signed) error {
	msg := wire.SignedMessage(s.Path, s.Token, s.Shard, s.Expiry.UnixMilli(), s.Mode, s.Permits)
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

// ErrNotExclusive is returned by VerifyExclusive for a shared hold.
var ErrNotExclusive = errors.New("fence: signed token is a shared hold, not an exclusive one")

// VerifyExclusive is Verify for a resource that only exclusive holders may
// write: a validly signed shared hold (a reader, a semaphore permit) is
// refused with ErrNotExclusive.
func (v *Verifier) VerifyExclusive(s Signed) error {
	if err := v.Verify(s); err != nil {
		return err
	}
	if s.Mode != wire.Exclusive {
		return fmt.Errorf("%w (%s, token %d)", ErrNotExclusive, s.Path, s.Token)
	}
	return nil
}
