package router

import (
	"crypto/ed25519"
	"time"

	"github.com/wardenlock/warden/wire"
)

// sign attaches the cluster's signature to a grant the client asked to have
// signed (FlagSigned), when this router has the signing key. The signature
// covers (path, token, shard, expiry); expiry is the grant's lease TTL from
// now, after which a resource must not honour the token without seeing a
// newer signature. Nodes sign with the same cluster key, so any of them can.
func (s *Server) sign(req *wire.Request, resp *wire.Response) {
	key := s.cfg.SigningKey
	if key == nil || !req.Has(wire.FlagSigned) || !isGrant(req, resp) {
		return
	}
	var shard uint64
	if t := s.cache.table(); t != nil {
		if r, err := t.Locate(req.Path); err == nil {
			shard = r.Shard
		}
	}
	ttl := time.Duration(req.TTL) * time.Millisecond
	if ttl <= 0 {
		ttl = time.Duration(resp.TTL) * time.Millisecond
	}
	expiry := time.Now().Add(ttl).UnixMilli()
	sig := ed25519.Sign(key, wire.SignedMessage(req.Path, resp.Token, shard, expiry))
	resp.Signed = &wire.SignedGrant{Shard: shard, Expiry: expiry, Sig: sig}
}
