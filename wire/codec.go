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
// Field numbers are the protocol (docs/protocol.md); never reuse one.

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
	w.uint(1, r.ID)
	w.uint(2, uint64(r.Op))
	w.str(3, r.Path)
	w.uint(4, uint64(r.Mode))
	w.uint(5, r.Lease)
	w.int(6, r.TTL)
	w.int(7, r.Wait)
	w.uint(8, r.Token)
	w.str(9, r.Owner)
	w.bytes(10, r.Value)
	w.uint(11, r.Version)
	w.uint(12, r.Rev)
	w.uint(13, r.Client)
	w.uint(14, r.Seq)
	w.uint(15, r.AckSeq)
	w.uint(16, r.Gen)
	w.uint(17, uint64(r.Flags))
	w.uint(18, uint64(r.Limit))
	w.uint(19, r.Stream)
	w.str(20, r.Auth)
	w.value(21, len(r.Leases) > 0, r.Leases)
	w.value(22, len(r.Ranges) > 0, r.Ranges)
	w.uint(23, r.Shard)
	w.uint(24, r.Term)
	w.value(65, len(r.Remaining) > 0, r.Remaining)
	w.uint(80, uint64(r.Chunk))
	w.uint(81, r.ToReplica)
	w.str(70, r.Identity)
	w.uint(71, r.LeaseKey)
	w.value(30, len(r.Paths) > 0, r.Paths)
	w.int(31, r.Grace)
	w.str(32, r.Target)
	w.uint(33, uint64(r.Permits))
	w.int(34, r.LockDelay)
	w.int(35, r.Priority)
	w.str(60, r.Trace)
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
		case 1:
			r.ID, err = dec.DecodeUint64()
		case 2:
			var v uint8
			v, err = dec.DecodeUint8()
			r.Op = Op(v)
		case 3:
			r.Path, err = dec.DecodeString()
		case 4:
			var v uint8
			v, err = dec.DecodeUint8()
			r.Mode = Mode(v)
		case 5:
			r.Lease, err = dec.DecodeUint64()
		case 6:
			r.TTL, err = dec.DecodeInt64()
		case 7:
			r.Wait, err = dec.DecodeInt64()
		case 8:
			r.Token, err = dec.DecodeUint64()
		case 9:
			r.Owner, err = dec.DecodeString()
		case 10:
			r.Value, err = dec.DecodeBytes()
		case 11:
			r.Version, err = dec.DecodeUint64()
		case 12:
			r.Rev, err = dec.DecodeUint64()
		case 13:
			r.Client, err = dec.DecodeUint64()
		case 14:
			r.Seq, err = dec.DecodeUint64()
		case 15:
			r.AckSeq, err = dec.DecodeUint64()
		case 16:
			r.Gen, err = dec.DecodeUint64()
		case 17:
			r.Flags, err = dec.DecodeUint32()
		case 18:
			r.Limit, err = dec.DecodeUint32()
		case 19:
			r.Stream, err = dec.DecodeUint64()
		case 20:
			r.Auth, err = dec.DecodeString()
		case 21:
			err = decodeList(dec, &r.Leases)
		case 22:
			err = decodeList(dec, &r.Ranges)
		case 23:
			r.Shard, err = dec.DecodeUint64()
		case 24:
			r.Term, err = dec.DecodeUint64()
		case 65:
			err = decodeList(dec, &r.Remaining)
		case 80:
			r.Chunk, err = dec.DecodeUint32()
		case 81:
			r.ToReplica, err = dec.DecodeUint64()
		case 70:
			r.Identity, err = dec.DecodeString()
		case 71:
			r.LeaseKey, err = dec.DecodeUint64()
		case 30:
			err = decodeList(dec, &r.Paths)
		case 31:
			r.Grace, err = dec.DecodeInt64()
		case 32:
			r.Target, err = dec.DecodeString()
		case 33:
			r.Permits, err = dec.DecodeUint32()
		case 34:
			r.LockDelay, err = dec.DecodeInt64()
		case 35:
			r.Priority, err = dec.DecodeInt64()
		case 60:
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
	w.uint(1, r.ID)
	w.uint(2, uint64(r.Code))
	w.str(3, r.Msg)
	w.uint(4, r.Token)
	w.uint(5, r.Lease)
	w.int(6, r.TTL)
	w.uint(7, r.Rev)
	w.bytes(8, r.Value)
	w.uint(9, r.Version)
	w.uint(10, uint64(r.Mode))
	w.uint(11, uint64(r.Count))
	w.str(12, r.Owner)
	w.str(13, r.Path)
	w.uint(14, r.Stream)
	w.value(15, r.Hint != nil, r.Hint)
	w.value(16, len(r.Holders) > 0, r.Holders)
	w.value(17, len(r.Waiters) > 0, r.Waiters)
	w.value(18, len(r.KVs) > 0, r.KVs)
	w.value(19, len(r.Events) > 0, r.Events)
	w.value(20, len(r.Leases) > 0, r.Leases)
	w.value(21, len(r.Ranges) > 0, r.Ranges)
	w.value(22, len(r.Grants) > 0, r.Grants)
	w.value(23, r.Table != nil, r.Table)
	w.value(24, r.Signed != nil, r.Signed)
	w.value(70, len(r.Denied) > 0, r.Denied)
	w.int(30, r.DelayUntil)
	w.int(31, r.RevokeAt)
	w.uint(32, uint64(r.Permits))
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
		case 1:
			r.ID, err = dec.DecodeUint64()
		case 2:
			var v uint16
			v, err = dec.DecodeUint16()
			r.Code = Code(v)
		case 3:
			r.Msg, err = dec.DecodeString()
		case 4:
			r.Token, err = dec.DecodeUint64()
		case 5:
			r.Lease, err = dec.DecodeUint64()
		case 6:
			r.TTL, err = dec.DecodeInt64()
		case 7:
			r.Rev, err = dec.DecodeUint64()
		case 8:
			r.Value, err = dec.DecodeBytes()
		case 9:
			r.Version, err = dec.DecodeUint64()
		case 10:
			var v uint8
			v, err = dec.DecodeUint8()
			r.Mode = Mode(v)
		case 11:
			r.Count, err = dec.DecodeUint32()
		case 12:
			r.Owner, err = dec.DecodeString()
		case 13:
			r.Path, err = dec.DecodeString()
		case 14:
			r.Stream, err = dec.DecodeUint64()
		case 15:
			r.Hint = new(Hint)
			err = dec.Decode(r.Hint)
		case 16:
			err = decodeList(dec, &r.Holders)
		case 17:
			err = decodeList(dec, &r.Waiters)
		case 18:
			err = decodeList(dec, &r.KVs)
		case 19:
			err = decodeList(dec, &r.Events)
		case 20:
			err = decodeList(dec, &r.Leases)
		case 21:
			err = decodeList(dec, &r.Ranges)
		case 22:
			err = decodeList(dec, &r.Grants)
		case 23:
			r.Table = new(RouteTable)
			err = dec.Decode(r.Table)
		case 24:
			r.Signed = new(SignedGrant)
			err = dec.Decode(r.Signed)
		case 70:
			err = decodeList(dec, &r.Denied)
		case 30:
			r.DelayUntil, err = dec.DecodeInt64()
		case 31:
			r.RevokeAt, err = dec.DecodeInt64()
		case 32:
			r.Permits, err = dec.DecodeUint32()
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
