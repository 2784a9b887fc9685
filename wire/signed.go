package wire

import "encoding/binary"

// SignedGrant accompanies a grant when the request set FlagSigned and the
// cluster has a signing key: an Ed25519 signature over SignedMessage(path,
// token, shard, expiry), which a protected resource verifies offline with
// the cluster's public key (package fence).
type SignedGrant struct {
	_msgpack struct{} `msgpack:",as_array"`
	Shard    uint64
	Expiry   int64 // unix ms after which the grant must not be honoured without renewal
	Sig      []byte
}

// signedDomain separates Warden fencing signatures from any other use of
// the key.
const signedDomain = "warden-fence-v1\x00"

// SignedMessage is the exact byte string that is signed.
func SignedMessage(path string, token, shard uint64, expiry int64) []byte {
	b := make([]byte, 0, len(signedDomain)+len(path)+1+24)
	b = append(b, signedDomain...)
	b = append(b, path...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, token)
	b = binary.BigEndian.AppendUint64(b, shard)
	b = binary.BigEndian.AppendUint64(b, uint64(expiry))
	return b
}
