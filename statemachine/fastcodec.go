package statemachine

import (
	"encoding/binary"
	"math"

	"github.com/wardenlock/warden/wire"
)

// A hand-written msgpack reader and writer for the hot path of Update: the
// fields of wire.Request that log entries carry, and responses without list
// fields. They accept and produce exactly what the msgpack library would
// (command_test.go checks both against it); anything unusual (an extension
// header, an unknown or list field, an odd encoding) makes the reader give
// up, and the entry is decoded again by the library, errors included.

// fastReader reads msgpack from an entry. Strings are cut from one string
// copy of the whole entry (one allocation per entry, not per field); code
// that keeps a request string beyond the entry clones it.
type fastReader struct {
	b   []byte
	str string // the same bytes as b
	pos int
	ok  bool
}

func (r *fastReader) byte() byte {
	if r.pos >= len(r.b) {
		r.ok = false
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *fastReader) next(n int) []byte {
	if n < 0 || len(r.b)-r.pos < n {
		r.ok = false
		return nil
	}
	p := r.b[r.pos : r.pos+n]
	r.pos += n
	return p
}

// uint mirrors msgpack's Decoder.DecodeUint64.
func (r *fastReader) uint() uint64 {
	c := r.byte()
	switch {
	case c <= 0x7f || c >= 0xe0: // fixnums, negative ones sign-extended
		return uint64(int8(c))
	case c == 0xc0: // nil
		return 0
	case c == 0xcc:
		return uint64(r.byte())
	case c == 0xd0:
		return uint64(int8(r.byte()))
	case c == 0xcd, c == 0xd1:
		p := r.next(2)
		if p == nil {
			return 0
		}
		v := binary.BigEndian.Uint16(p)
		if c == 0xd1 {
			return uint64(int16(v))
		}
		return uint64(v)
	case c == 0xce, c == 0xd2:
		p := r.next(4)
		if p == nil {
			return 0
		}
		v := binary.BigEndian.Uint32(p)
		if c == 0xd2 {
			return uint64(int32(v))
		}
		return uint64(v)
	case c == 0xcf, c == 0xd3:
		p := r.next(8)
		if p == nil {
			return 0
		}
		return binary.BigEndian.Uint64(p)
	}
	r.ok = false
	return 0
}

// int mirrors msgpack's Decoder.DecodeInt64, which reads every integer
// code as DecodeUint64 does and reinterprets the bits.
func (r *fastReader) int() int64 { return int64(r.uint()) }

// strLen mirrors msgpack's bytesLen: -1 for nil.
func (r *fastReader) strLen() int {
	c := r.byte()
	switch {
	case c >= 0xa0 && c <= 0xbf:
		return int(c & 0x1f)
	case c == 0xc0:
		return -1
	case c == 0xd9 || c == 0xc4:
		return int(r.byte())
	case c == 0xda || c == 0xc5:
		if p := r.next(2); p != nil {
			return int(binary.BigEndian.Uint16(p))
		}
	case c == 0xdb || c == 0xc6:
		if p := r.next(4); p != nil {
			return int(binary.BigEndian.Uint32(p))
		}
	}
	r.ok = false
	return 0
}

func (r *fastReader) string() string {
	n := r.strLen()
	if n <= 0 || !r.ok {
		return ""
	}
	start := r.pos
	if r.next(n) == nil {
		return ""
	}
	return r.str[start : start+n]
}

// bytes mirrors DecodeBytes: nil stays nil, empty is empty, and the value
// is a fresh copy.
func (r *fastReader) bytes() []byte {
	n := r.strLen()
	if n < 0 || !r.ok {
		return nil
	}
	p := r.next(n)
	if p == nil {
		return nil
	}
	return append(make([]byte, 0, n), p...)
}

func (r *fastReader) containerLen(fix0, fixMax, c16, c32 byte) int {
	c := r.byte()
	switch {
	case c >= fix0 && c <= fixMax:
		return int(c - fix0)
	case c == c16:
		if p := r.next(2); p != nil {
			return int(binary.BigEndian.Uint16(p))
		}
	case c == c32:
		if p := r.next(4); p != nil {
			return int(binary.BigEndian.Uint32(p))
		}
	}
	r.ok = false // nil, extension headers and anything else: let the library say
	return 0
}

// request mirrors wire.Request.DecodeMsgpack for the fields a log entry uses.
func (r *fastReader) request(q *wire.Request) {
	n := r.containerLen(0x80, 0x8f, 0xde, 0xdf)
	*q = wire.Request{}
	for i := 0; i < n && r.ok; i++ {
		switch r.uint() {
		case 1:
			q.ID = r.uint()
		case 2:
			q.Op = wire.Op(uint8(r.uint()))
		case 3:
			q.Path = r.string()
		case 4:
			q.Mode = wire.Mode(uint8(r.uint()))
		case 5:
			q.Lease = r.uint()
		case 6:
			q.TTL = r.int()
		case 7:
			q.Wait = r.int()
		case 8:
			q.Token = r.uint()
		case 9:
			q.Owner = r.string()
		case 10:
			q.Value = r.bytes()
		case 11:
			q.Version = r.uint()
		case 12:
			q.Rev = r.uint()
		case 13:
			q.Client = r.uint()
		case 14:
			q.Seq = r.uint()
		case 15:
			q.AckSeq = r.uint()
		case 16:
			q.Gen = r.uint()
		case 17:
			q.Flags = uint32(r.uint())
		case 18:
			q.Limit = uint32(r.uint())
		case 19:
			q.Stream = r.uint()
		case 20:
			q.Auth = r.string()
		case 23:
			q.Shard = r.uint()
		case 24:
			q.Term = r.uint()
		case 70:
			q.Identity = r.string()
		case 71:
			q.LeaseKey = r.uint()
		default: // lists (21, 22) and unknown fields
			r.ok = false
		}
	}
}

// fastDecode fills s.reqs from an entry's body (after the two header
// bytes). It reports false, having decided nothing, when the library must
// decode the entry instead.
func (s *StateMachine) fastDecode(body []byte) (int64, bool) {
	r := fastReader{b: body, ok: true}
	now := r.int()
	n := r.containerLen(0x90, 0x9f, 0xdc, 0xdd)
	if !r.ok || n > len(body)-r.pos {
		return 0, false
	}
	if n > 0 {
		r.str = string(body)
	}
	if cap(s.reqs) < n {
		s.reqs = make([]wire.Request, n)
	}
	s.reqs = s.reqs[:n]
	for i := range s.reqs {
		r.request(&s.reqs[i])
		if !r.ok {
			break
		}
	}
	if !r.ok || r.pos != len(body) {
		s.reqs = s.reqs[:0]
		return 0, false
	}
	return now, true
}

// Writing.

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= math.MaxInt8:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func appendLen(b []byte, n int, fix0 byte, fixLimit int, c8, c16, c32 byte) []byte {
	switch {
	case n < fixLimit:
		return append(b, fix0|byte(n))
	case c8 != 0 && n <= math.MaxUint8:
		return append(b, c8, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, c16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, c32), uint32(n))
}

func appendString(b []byte, s string) []byte {
	return append(appendLen(b, len(s), 0xa0, 32, 0xd9, 0xda, 0xdb), s...)
}

func appendBytes(b []byte, v []byte) []byte {
	if v == nil {
		return append(b, 0xc0)
	}
	return append(appendLen(b, len(v), 0, 0, 0xc4, 0xc5, 0xc6), v...)
}

// fastEncodable: responses whose fields appendResponse writes itself.
func fastEncodable(r *wire.Response) bool {
	return r.Hint == nil && len(r.Holders) == 0 && len(r.Waiters) == 0 && len(r.KVs) == 0 &&
		len(r.Events) == 0 && len(r.Leases) == 0 && len(r.Ranges) == 0 && len(r.Denied) == 0 &&
		r.Table == nil && r.Signed == nil && r.DelayUntil == 0 && r.RevokeAt == 0 && r.Permits == 0
}

// appendResponse writes r exactly as wire.Response.EncodeMsgpack does with a
// compact-ints encoder (for fastEncodable responses).
func appendResponse(b []byte, r *wire.Response) []byte {
	n := 0
	for _, set := range [...]bool{r.ID != 0, r.Code != 0, r.Msg != "", r.Token != 0, r.Lease != 0, r.TTL != 0,
		r.Rev != 0, r.Value != nil, r.Version != 0, r.Mode != 0, r.Count != 0, r.Owner != "", r.Path != "",
		r.Stream != 0, len(r.Grants) > 0} {
		if set {
			n++
		}
	}
	b = appendLen(b, n, 0x80, 16, 0, 0xde, 0xdf)
	b = appendUintField(b, 1, r.ID)
	b = appendUintField(b, 2, uint64(r.Code))
	b = appendStringField(b, 3, r.Msg)
	b = appendUintField(b, 4, r.Token)
	b = appendUintField(b, 5, r.Lease)
	if r.TTL != 0 {
		b = appendInt(append(b, 6), r.TTL)
	}
	b = appendUintField(b, 7, r.Rev)
	if r.Value != nil {
		b = appendBytes(append(b, 8), r.Value)
	}
	b = appendUintField(b, 9, r.Version)
	b = appendUintField(b, 10, uint64(r.Mode))
	b = appendUintField(b, 11, uint64(r.Count))
	b = appendStringField(b, 12, r.Owner)
	b = appendStringField(b, 13, r.Path)
	b = appendUintField(b, 14, r.Stream)
	if len(r.Grants) > 0 {
		b = appendLen(append(b, 22), len(r.Grants), 0x90, 16, 0, 0xdc, 0xdd)
		for i := range r.Grants {
			g := &r.Grants[i]
			b = append(b, 0x96) // as_array, six fields
			b = appendUint(b, g.Client)
			b = appendUint(b, g.Seq)
			b = appendString(b, g.Path)
			b = appendUint(b, g.Token)
			b = appendUint(b, g.Lease)
			b = appendUint(b, uint64(g.Mode))
		}
	}
	return b
}

// Field keys below 128 are one byte.

func appendUintField(b []byte, key byte, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendUint(append(b, key), v)
}

func appendStringField(b []byte, key byte, v string) []byte {
	if v == "" {
		return b
	}
	return appendString(append(b, key), v)
}
