package fence

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wardenlock/warden/wire"
)

func TestGuardRefusesLowerTokens(t *testing.T) {
	g := NewGuard()
	steps := []struct {
		name  string
		path  string
		token uint64
		ok    bool
	}{
		{"first holder", "/a/b", 5, true},
		{"same holder again", "/a/b", 5, true},
		{"newer holder", "/a/b", 9, true},
		{"paused old holder", "/a/b", 5, false},
		{"other lock unaffected", "/a/c", 1, true},
		{"token zero", "/a/d", 0, false},
	}
	for _, s := range steps {
		err := g.Check(s.path, s.token)
		if s.ok != (err == nil) || !s.ok && !errors.Is(err, ErrStaleToken) {
			t.Fatalf("%s: Check(%s, %d) = %v", s.name, s.path, s.token, err)
		}
	}
}

// Two holders race writes through Do: once the newer token has written,
// the older one never does again.
func TestGuardDoIsAtomic(t *testing.T) {
	g := NewGuard()
	var mu sync.Mutex
	var log []uint64
	var wg sync.WaitGroup
	for _, tok := range []uint64{3, 7} {
		wg.Add(1)
		go func(tok uint64) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				g.Do("/r/x", tok, func() error { mu.Lock(); log = append(log, tok); mu.Unlock(); return nil })
			}
		}(tok)
	}
	wg.Wait()
	seen7 := false
	for _, tok := range log {
		if tok == 7 {
			seen7 = true
		} else if seen7 {
			t.Fatal("a write with token 3 landed after one with token 7")
		}
	}
}

func TestVerifierChecksSignatureExpiryAndOrder(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.UnixMilli(1_700_000_000_000)
	sign := func(path string, token uint64, exp time.Time) Signed {
		sig := ed25519.Sign(priv, wire.SignedMessage(path, token, 2, exp.UnixMilli(), wire.Exclusive, 0))
		return Signed{Path: path, Token: token, Shard: 2, Expiry: exp, Mode: wire.Exclusive, Sig: sig}
	}
	v := &Verifier{Key: pub, Guard: NewGuard(), Now: func() time.Time { return now }}
	good := sign("/a/b", 10, now.Add(time.Minute))
	if err := v.Verify(good); err != nil {
		t.Fatal(err)
	}
	forged := good
	forged.Token = 11
	if err := v.Verify(forged); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("forged token: %v", err)
	}
	if err := v.Verify(sign("/a/b", 12, now.Add(-time.Second))); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired token: %v", err)
	}
	if err := v.Verify(sign("/a/b", 9, now.Add(time.Minute))); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("older token after a newer one: %v", err)
	}
	// The mode and the permits are signed: a shared hold or a semaphore
	// permit cannot be passed off as an exclusive lock, nor the other way.
	sharedSig := ed25519.Sign(priv, wire.SignedMessage("/a/s", 20, 2, now.Add(time.Minute).UnixMilli(), wire.Shared, 3))
	shared := Signed{Path: "/a/s", Token: 20, Shard: 2, Expiry: now.Add(time.Minute), Mode: wire.Shared, Permits: 3, Sig: sharedSig}
	if err := (&Verifier{Key: pub, Now: v.Now}).Verify(shared); err != nil {
		t.Fatalf("a signed permit does not verify: %v", err)
	}
	if err := (&Verifier{Key: pub, Now: v.Now}).VerifyExclusive(shared); !errors.Is(err, ErrNotExclusive) {
		t.Fatalf("a permit passed as exclusive: %v", err)
	}
	for name, f := range map[string]func(*Signed){
		"mode":    func(s *Signed) { s.Mode = wire.Exclusive },
		"permits": func(s *Signed) { s.Permits = 1 },
	} {
		forged := shared
		f(&forged)
		if err := (&Verifier{Key: pub, Now: v.Now}).Verify(forged); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("a permit with a changed %s verified: %v", name, err)
		}
	}
	if err := (&Verifier{Key: pub, Now: v.Now}).VerifyExclusive(good); err != nil {
		t.Fatalf("an exclusive grant refused as exclusive: %v", err)
	}
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	if err := (&Verifier{Key: otherPub}).Verify(good); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("wrong cluster key: %v", err)
	}
}
