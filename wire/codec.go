package wire

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Request and Response are encoded as msgpack maps from small integer field
// numbers to values, holding only the non-zero fields: compact, and a reader
// skips fields it does not know, so fields can be added without a version bump.
// The field numbers are declared in fields.go.

var (
	_ msgpack.CustomEncoder = (*Request)(nil)
	_ msgpack.CustomDecoder = (*Request)(nil)
	_ msgpack.CustomEncoder = (*Response)(nil)
	_ msgpack.CustomDecoder = (*Response)(nil)
)

// fieldWriter writes key/value pairs and counts them, so a map header can be
// written in a first pass that only counts.
type fieldWriter struct {
	enc   *msgpack.Encoder
	count int
	err   error
}

func (w *fieldWriter) key(k int) bool {
	if w.enc == nil {
		w.count++
		return false
	}
	if w.err == nil {
		w.err = w.enc.EncodeUint(uint64(k))
	}
	return w.err == nil
}

func (w *fieldWriter) uint(k int, v uint64) {
	if v != 0 && w.key(k) {
		w.err = w.enc.EncodeUint(v)
	}
}

func (w *fieldWriter) int(k int, v int64) {
	if v != 0 && w.key(k) {
		w.err = w.enc.EncodeInt(v)
	}
}

func (w *fieldWriter) str(k int, v string) {
	if v != "" && w.key(k) {
		w.err = w.enc.EncodeString(v)
	}
}

func (w *fieldWriter) bytes(k int, v []byte) {
	if v != nil && w.key(k) {
		w.err = w.enc.EncodeBytes(v)
	}
}

func (w *fieldWriter) value(k int, present bool, v any) {
	if present && w.key(k) {
		w.err = w.enc.Encode(v)
	}
}

func (r *Request) fields(w *fieldWriter) {
	w.uint(reqID, r.ID)
	w.uint(reqOp, uint64(r.Op))
	w.str(reqPath, r.Path)
	w.uint(reqMode, uint64(r.Mode))
	w.uint(reqLease, r.Lease)
	w.int(reqTTL, r.TTL)
	w.int(reqWait, r.Wait)
	w.uint(reqToken, r.Token)
	w.str(reqOwner, r.Owner)
	w.bytes(reqValue, r.Value)
	w.uint(reqVersion, r.Version)
	w.uint(reqRev, r.Rev)
	w.uint(reqClient, r.Client)
	w.uint(reqSeq, r.Seq)
	w.uint(reqAckSeq, r.AckSeq)
	w.uint(reqGen, r.Gen)
	w.uint(reqFlags, uint64(r.Flags))
	w.uint(reqLimit, uint64(r.Limit))
	w.uint(reqStream, r.Stream)
	w.str(reqAuth, r.Auth)
	w.value(reqLeases, len(r.Leases) > 0, r.Leases)
	w.value(reqRanges, len(r.Ranges) > 0, r.Ranges)
	w.uint(reqShard, r.Shard)
	w.uint(reqTerm, r.Term)
	w.value(reqRemaining, len(r.Remaining) > 0, r.Remaining)
	w.uint(reqChunk, uint64(r.Chunk))
	w.uint(reqToReplica, r.ToReplica)
	w.str(reqIdentity, r.Identity)
	w.uint(reqLeaseKey, r.LeaseKey)
	w.value(reqPaths, len(r.Paths) > 0, r.Paths)
	w.int(reqGrace, r.Grace)
	w.str(reqTarget, r.Target)
	w.uint(reqPermits, uint64(r.Permits))
	w.int(reqLockDelay, r.LockDelay)
	w.int(reqPriority, r.Priority)
	w.value(reqPosition, len(r.Position) > 0, r.Position)
	w.str(reqTrace, r.Trace)
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (r *Request) EncodeMsgpack(enc *msgpack.Encoder) error {
	counter := fieldWriter{}
	r.fields(&counter)
	if err := enc.EncodeMapLen(counter.count); err != nil {
		return err
	}
	w := fieldWriter{enc: enc}
	r.fields(&w)
	return w.err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (r *Request) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("wire: request is nil")
	}
	*r = Request{}
	for i := 0; i < n; i++ {
		k, err := dec.DecodeUint()
		if err != nil {
			return err
		}
		switch k {
		case reqID:
			r.ID, err = dec.DecodeUint64()
		case reqOp:
			var v uint8
			v, err = dec.DecodeUint8()
			r.Op = Op(v)
		case reqPath:
			r.Path, err = dec.DecodeString()
		case reqMode:
			var v uint8
			v, err = dec.DecodeUint8()
			r.Mode = Mode(v)
		case reqLease:
			r.Lease, err = dec.DecodeUint64()
		case reqTTL:
			r.TTL, err = dec.DecodeInt64()
		case reqWait:
			r.Wait, err = dec.DecodeInt64()
		case reqToken:
			r.Token, err = dec.DecodeUint64()
		case reqOwner:
			r.Owner, err = dec.DecodeString()
		case reqValue:
			r.Value, err = dec.DecodeBytes()
		case reqVersion:
			r.Version, err = dec.DecodeUint64()
		case reqRev:
			r.Rev, err = dec.DecodeUint64()
		case reqClient:
			r.Client, err = dec.DecodeUint64()
		case reqSeq:
			r.Seq, err = dec.DecodeUint64()
		case reqAckSeq:
			r.AckSeq, err = dec.DecodeUint64()
		case reqGen:
			r.Gen, err = dec.DecodeUint64()
		case reqFlags:
			r.Flags, err = dec.DecodeUint32()
		case reqLimit:
			r.Limit, err = dec.DecodeUint32()
		case reqStream:
			r.Stream, err = dec.DecodeUint64()
		case reqAuth:
			r.Auth, err = dec.DecodeString()
		case reqLeases:
			err = decodeList(dec, &r.Leases)
		case reqRanges:
			err = decodeList(dec, &r.Ranges)
		case reqShard:
			r.Shard, err = dec.DecodeUint64()
		case reqTerm:
			r.Term, err = dec.DecodeUint64()
		case reqRemaining:
			err = decodeList(dec, &r.Remaining)
		case reqChunk:
			r.Chunk, err = dec.DecodeUint32()
		case reqToReplica:
			r.ToReplica, err = dec.DecodeUint64()
		case reqIdentity:
			r.Identity, err = dec.DecodeString()
		case reqLeaseKey:
			r.LeaseKey, err = dec.DecodeUint64()
		case reqPaths:
			err = decodeList(dec, &r.Paths)
		case reqGrace:
			r.Grace, err = dec.DecodeInt64()
		case reqTarget:
			r.Target, err = dec.DecodeString()
		case reqPermits:
			r.Permits, err = dec.DecodeUint32()
		case reqLockDelay:
			r.LockDelay, err = dec.DecodeInt64()
		case reqPriority:
			r.Priority, err = dec.DecodeInt64()
		case reqPosition:
			err = decodeList(dec, &r.Position)
		case reqTrace:
			r.Trace, err = dec.DecodeString()
		default:
			err = dec.Skip()
		}
		if err != nil {
			return fmt.Errorf("wire: request field %d: %w", k, err)
		}
	}
	return nil
}

func (r *Response) fields(w *fieldWriter) {
	w.uint(respID, r.ID)
	w.uint(respCode, uint64(r.Code))
	w.str(respMsg, r.Msg)
	w.uint(respToken, r.Token)
	w.uint(respLease, r.Lease)
	w.int(respTTL, r.TTL)
	w.uint(respRev, r.Rev)
	w.bytes(respValue, r.Value)
	w.uint(respVersion, r.Version)
	w.uint(respMode, uint64(r.Mode))
	w.uint(respCount, uint64(r.Count))
	w.str(respOwner, r.Owner)
	w.str(respPath, r.Path)
	w.uint(respStream, r.Stream)
	w.value(respHint, r.Hint != nil, r.Hint)
	w.value(respHolders, len(r.Holders) > 0, r.Holders)
	w.value(respWaiters, len(r.Waiters) > 0, r.Waiters)
	w.value(respKVs, len(r.KVs) > 0, r.KVs)
	w.value(respEvents, len(r.Events) > 0, r.Events)
	w.value(respLeases, len(r.Leases) > 0, r.Leases)
	w.value(respRanges, len(r.Ranges) > 0, r.Ranges)
	w.value(respGrants, len(r.Grants) > 0, r.Grants)
	w.value(respTable, r.Table != nil, r.Table)
	w.value(respSigned, r.Signed != nil, r.Signed)
	w.value(respDenied, len(r.Denied) > 0, r.Denied)
	w.int(respDelayUntil, r.DelayUntil)
	w.int(respRevokeAt, r.RevokeAt)
	w.uint(respPermits, uint64(r.Permits))
	w.value(respPosition, len(r.Position) > 0, r.Position)
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (r *Response) EncodeMsgpack(enc *msgpack.Encoder) error {
	counter := fieldWriter{}
	r.fields(&counter)
	if err := enc.EncodeMapLen(counter.count); err != nil {
		return err
	}
	w := fieldWriter{enc: enc}
	r.fields(&w)
	return w.err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (r *Response) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("wire: response is nil")
	}
	*r = Response{}
	for i := 0; i < n; i++ {
		k, err := dec.DecodeUint()
		if err != nil {
			return err
		}
		switch k {
		case respID:
			r.ID, err = dec.DecodeUint64()
		case respCode:
			var v uint16
			v, err = dec.DecodeUint16()
			r.Code = Code(v)
		case respMsg:
			r.Msg, err = dec.DecodeString()
		case respToken:
			r.Token, err = dec.DecodeUint64()
		case respLease:
			r.Lease, err = dec.DecodeUint64()
		case respTTL:
			r.TTL, err = dec.DecodeInt64()
		case respRev:
			r.Rev, err = dec.DecodeUint64()
		case respValue:
			r.Value, err = dec.DecodeBytes()
		case respVersion:
			r.Version, err = dec.DecodeUint64()
		case respMode:
			var v uint8
			v, err = dec.DecodeUint8()
			r.Mode = Mode(v)
		case respCount:
			r.Count, err = dec.DecodeUint32()
		case respOwner:
			r.Owner, err = dec.DecodeString()
		case respPath:
			r.Path, err = dec.DecodeString()
		case respStream:
			r.Stream, err = dec.DecodeUint64()
		case respHint:
			r.Hint = new(Hint)
			err = dec.Decode(r.Hint)
		case respHolders:
			err = decodeList(dec, &r.Holders)
		case respWaiters:
			err = decodeList(dec, &r.Waiters)
		case respKVs:
			err = decodeList(dec, &r.KVs)
		case respEvents:
			err = decodeList(dec, &r.Events)
		case respLeases:
			err = decodeList(dec, &r.Leases)
		case respRanges:
			err = decodeList(dec, &r.Ranges)
		case respGrants:
			err = decodeList(dec, &r.Grants)
		case respTable:
			r.Table = new(RouteTable)
			err = dec.Decode(r.Table)
		case respSigned:
			r.Signed = new(SignedGrant)
			err = dec.Decode(r.Signed)
		case respDenied:
			err = decodeList(dec, &r.Denied)
		case respDelayUntil:
			r.DelayUntil, err = dec.DecodeInt64()
		case respRevokeAt:
			r.RevokeAt, err = dec.DecodeInt64()
		case respPermits:
			r.Permits, err = dec.DecodeUint32()
		case respPosition:
			err = decodeList(dec, &r.Position)
		default:
			err = dec.Skip()
		}
		if err != nil {
			return fmt.Errorf("wire: response field %d: %w", k, err)
		}
	}
	return nil
}

// MaxListLen bounds the elements of any list in a frame.
const MaxListLen = 1 << 20

// decodeList decodes a msgpack array element by element. The declared
// length is only an upper bound on growth: a frame that claims billions of
// elements runs out of bytes long before it can make the decoder allocate
// for them.
func decodeList[T any](dec *msgpack.Decoder, out *[]T) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 0 {
		*out = nil
		return nil
	}
	if n > MaxListLen {
		return fmt.Errorf("list of %d elements exceeds the limit of %d", n, MaxListLen)
	}
	list := make([]T, 0, min(n, 64))
	known := recordFields(reflect.TypeFor[T]())
	for i := 0; i < n; i++ {
		var v T
		if err := decodeElem(dec, &v, known); err != nil {
			return err
		}
		list = append(list, v)
	}
	*out = list
	return nil
}

// decodeElem decodes one list element. A record (an as_array struct of
// known fields) written by a newer peer may carry more elements than this
// version knows: they are skipped (docs/protocol.md §3.3), where the
// library alone refuses any count but its own.
func decodeElem(dec *msgpack.Decoder, v any, known int) error {
	if known == 0 {
		return dec.Decode(v)
	}
	c, err := dec.PeekCode()
	if err != nil {
		return err
	}
	longer := msgpcode.IsFixedArray(c) && int(c&0x0f) > known || c == msgpcode.Array16 || c == msgpcode.Array32
	if !longer {
		return dec.Decode(v) // the record's own length, or another form the library reads (a map, nil)
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 0 {
		return nil
	}
	keep := min(n, known)
	b := AppendArrayLen(nil, keep)
	for i := 0; i < n; i++ {
		if i >= keep {
			if err := dec.Skip(); err != nil {
				return err
			}
			continue
		}
		raw, err := dec.DecodeRaw()
		if err != nil {
			return err
		}
		b = append(b, raw...)
	}
	return msgpack.Unmarshal(b, v)
}

// recordFields is the number of fields of an as_array struct type (0 for
// any other type).
func recordFields(t reflect.Type) int {
	if t.Kind() != reflect.Struct || t.NumField() == 0 || t.Field(0).Name != "_msgpack" ||
		!strings.Contains(t.Field(0).Tag.Get("msgpack"), "as_array") {
		return 0
	}
	return t.NumField() - 1
}
