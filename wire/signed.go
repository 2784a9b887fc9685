package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// SignedGrant accompanies a grant when the request set FlagSigned and the
// cluster has a signing key: an Ed25519 signature over SignedMessage of the
// grant, which a protected resource verifies offline with the cluster's
// public key (package fence). Encoded as an array [Shard, Expiry, Sig,
// Mode, Permits]; a decoder ignores elements it does not know.
type SignedGrant struct {
	Shard   uint64
	Expiry  int64 // unix ms: the lease's deadline as the shard leader knew it, at the latest
	Sig     []byte
	Mode    Mode   // the lock mode granted
	Permits uint32 // a semaphore's permit count (0: a plain lock or an election)
}

var (
	_ msgpack.CustomEncoder = (*SignedGrant)(nil)
	_ msgpack.CustomDecoder = (*SignedGrant)(nil)
)

// EncodeMsgpack writes g as its array.
func (g *SignedGrant) EncodeMsgpack(enc *msgpack.Encoder) error {
	return enc.Encode([]any{g.Shard, g.Expiry, g.Sig, uint8(g.Mode), g.Permits})
}

// DecodeMsgpack reads the array, skipping elements appended by a newer
// version.
func (g *SignedGrant) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 3 {
		return fmt.Errorf("signed grant of %d elements, want at least 3", n)
	}
	*g = SignedGrant{}
	if g.Shard, err = dec.DecodeUint64(); err != nil {
		return err
	}
	if g.Expiry, err = dec.DecodeInt64(); err != nil {
		return err
	}
	if g.Sig, err = dec.DecodeBytes(); err != nil {
		return err
	}
	for i := 3; i < n; i++ {
		switch i {
		case 3:
			var m uint8
			m, err = dec.DecodeUint8()
			g.Mode = Mode(m)
		case 4:
			g.Permits, err = dec.DecodeUint32()
		default:
			err = dec.Skip()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Message is the byte string g's signature covers for a grant of token on
// path.
func (g *SignedGrant) Message(path string, token uint64) []byte {
	return SignedMessage(path, token, g.Shard, g.Expiry, g.Mode, g.Permits)
}

// signedDomain separates Warden fencing signatures from any other use of
// the key; v2 covers the mode and the permits.
const signedDomain = "warden-fence-v2\x00"

// SignedMessage is the exact byte string that is signed: the domain, the
// path and a 0 byte, then big-endian token, shard and expiry (8 bytes
// each), the mode (1 byte) and the permits (4 bytes).
func SignedMessage(path string, token, shard uint64, expiry int64, mode Mode, permits uint32) []byte {
	b := make([]byte, 0, len(signedDomain)+len(path)+1+29)
	b = append(b, signedDomain...)
	b = append(b, path...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, token)
	b = binary.BigEndian.AppendUint64(b, shard)
	b = binary.BigEndian.AppendUint64(b, uint64(expiry))
	b = append(b, byte(mode))
	b = binary.BigEndian.AppendUint32(b, permits)
	return b
}
