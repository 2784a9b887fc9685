package router

import (
	"crypto/ed25519"
	"time"

	"github.com/wardenlock/warden/wire"
)

// sign attaches the cluster's signature to a grant the client asked to have
// signed (FlagSigned), when this router has the signing key. The signature
// covers (path, token, shard, expiry, mode, permits). Its expiry is the
// time left on the grant's lease as the shard leader's lessor knew it when
// it answered (Response.TTL, set by the shard for signed grants), counted
// from when this router read the request, which came first: the signature
// never outlives the lease's deadline at that moment. A grant whose lease
// the leader could not vouch for (leadership moved while it was answered)
// gets no signature. Nodes sign with the same cluster key, so any of them
// can.
func (s *Server) sign(req *wire.Request, resp *wire.Response, arrived time.Duration) {
	key := s.cfg.SigningKey
	if key == nil || !req.Has(wire.FlagSigned) || !isGrant(req, resp) {
		return
	}
	resp.Signed = nil // a forwarding node's signature is replaced by ours
	if resp.TTL <= 0 || arrived == 0 {
		return
	}
	var shard uint64
	if t := s.cache.table(); t != nil {
		if r, err := t.Locate(req.Path); err == nil {
			shard = r.Shard
		}
	}
	// arrived is on the monotonic clock (monoNow): the wall time it was
	// is now minus the time since.
	expiry := time.Now().Add(arrived - monoNow() + time.Duration(resp.TTL)*time.Millisecond)
	g := &wire.SignedGrant{Shard: shard, Expiry: expiry.UnixMilli(), Mode: resp.Mode, Permits: req.Permits}
	g.Sig = ed25519.Sign(key, g.Message(req.Path, resp.Token))
	resp.Signed = g
}
