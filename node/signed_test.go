package node_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/fence"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
)

// TestSignedTokensVerifyOffline: with a cluster signing key, a grant asked
// for WithSignedToken carries an Ed25519 signature that a resource verifies
// with only the public key, and a paused older holder is refused.
func TestSignedTokensVerifyOffline(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	c := nodetest.Start(t, nodetest.Options{Edit: func(cfg *node.Config) { cfg.SigningKey = priv }})
	ctx := ctxT(t, 30*time.Second)
	cl := newClient(t, c)
	verifier := &fence.Verifier{Key: pub, Guard: fence.NewGuard()}

	first := client.NewMutex(session(t, cl, 10*time.Second), "/signed/ns/lock", client.WithSignedToken())
	if err := first.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	old, err := fence.FromGrant(first.Path(), first.Token(), first.Signed())
	if err != nil {
		t.Fatal(err)
	}
	if err := verifier.Verify(old); err != nil {
		t.Fatalf("a fresh signed grant does not verify: %v", err)
	}
	if old.Expiry.Before(time.Now().Add(5 * time.Second)) {
		t.Fatalf("expiry %v is shorter than the lease TTL", old.Expiry)
	}
	first.Unlock(ctx)

	second := client.NewMutex(session(t, cl, 10*time.Second), "/signed/ns/lock", client.WithSignedToken())
	if err := second.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	newer, _ := fence.FromGrant(second.Path(), second.Token(), second.Signed())
	if err := verifier.Verify(newer); err != nil {
		t.Fatal(err)
	}
	if err := verifier.Verify(old); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("the paused first holder's token was not refused: %v", err)
	}
	forged := newer
	forged.Token++
	if err := verifier.Verify(forged); !errors.Is(err, fence.ErrBadSignature) {
		t.Fatalf("a forged token verified: %v", err)
	}
	unsigned := client.NewMutex(session(t, cl, 10*time.Second), "/signed/ns/other")
	if err := unsigned.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if unsigned.Signed() != nil {
		t.Fatal("a grant that did not ask for a signature carries one")
	}
}
