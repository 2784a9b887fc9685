package wire

import "encoding/binary"

// Reader decodes, without reflection, the msgpack that the Append*
// functions and EncodeMsgpack write. It accepts a value only when it can
// give exactly what the library decoder would (fuzz_test.go checks this
// against the library on arbitrary bytes); anything else (a nil where a
// container was expected, an extension, an unknown field, a struct in map
// form, a Table or Signed field) makes it stop with OK() false, having
// promised nothing, and the caller decodes the same bytes with the library,
// which gives the typed error for garbage. So the set of accepted inputs and
// their meaning are the library's; the Reader is only the fast road to them.
//
// Strings are cut from one string copy of the input when the Reader was
// made with shared strings (one allocation per input, not per field): a
// string kept beyond the input keeps the whole input alive.
type Reader struct {
	b      []byte
	str    string // the same bytes as b, made on the first string read, when shared
	pos    int
	ok     bool
	shared bool
}

// sharedStringLimit: frames up to this size share one string copy.
const sharedStringLimit = 4 << 10

// NewReader returns a Reader over b. With shared set, strings share one
// copy of b (see Reader).
func NewReader(b []byte, shared bool) Reader {
	return Reader{b: b, ok: true, shared: shared}
}

// OK reports whether everything read so far was decoded.
func (r *Reader) OK() bool { return r.ok }

// Len is the number of bytes not yet read.
func (r *Reader) Len() int { return len(r.b) - r.pos }

func (r *Reader) byte() byte {
	if r.pos >= len(r.b) {
		r.ok = false
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *Reader) next(n int) []byte {
	if n < 0 || len(r.b)-r.pos < n {
		r.ok = false
		return nil
	}
	p := r.b[r.pos : r.pos+n]
	r.pos += n
	return p
}

// Uint reads an integer as msgpack's Decoder.DecodeUint64 does (nil is 0,
// negative numbers are sign-extended).
func (r *Reader) Uint() uint64 {
	c := r.byte()
	switch {
	case c <= 0x7f || c >= 0xe0:
		return uint64(int8(c))
	case c == 0xc0:
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

// Int reads an integer as DecodeInt64 does: the same codes as Uint, the
// bits reinterpreted.
func (r *Reader) Int() int64 { return int64(r.Uint()) }

// strLen mirrors the library's bytesLen: str and bin alike, -1 for nil.
func (r *Reader) strLen() int {
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

func (r *Reader) string() string {
	// A fixstr (up to 31 bytes: paths, owners) cut from the shared copy is
	// read in place; the rest by the general road.
	if p := r.pos; r.str != "" && p < len(r.b) && r.b[p]&0xe0 == 0xa0 {
		if end := p + 1 + int(r.b[p]&0x1f); end <= len(r.b) {
			r.pos = end
			return r.str[p+1 : end]
		}
	}
	n := r.strLen()
	if n <= 0 || !r.ok {
		return ""
	}
	start := r.pos
	p := r.next(n)
	if p == nil {
		return ""
	}
	if !r.shared {
		return string(p)
	}
	if r.str == "" {
		r.str = string(r.b)
	}
	return r.str[start : start+n]
}

// bytes mirrors DecodeBytes: nil stays nil, empty is empty, and the value
// is a fresh copy.
func (r *Reader) bytes() []byte {
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

func (r *Reader) containerLen(fix0, fixMax, c16, c32 byte) int {
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
	r.ok = false // nil, extensions and anything else: the library decides
	return 0
}

// ArrayLen reads an array header. A count larger than the bytes left (every
// element takes at least one) stops the Reader.
func (r *Reader) ArrayLen() int {
	n := r.containerLen(0x90, 0x9f, 0xdc, 0xdd)
	if n > r.Len() || n > MaxListLen {
		r.ok = false
		return 0
	}
	return n
}

func (r *Reader) mapLen() int {
	n := r.containerLen(0x80, 0x8f, 0xde, 0xdf)
	if n > r.Len() {
		r.ok = false
		return 0
	}
	return n
}

// structLen reads the array header of an as_array struct of want fields:
// the library accepts only that exact count.
func (r *Reader) structLen(want int) bool {
	if r.containerLen(0x90, 0x9f, 0xdc, 0xdd) != want {
		r.ok = false
	}
	return r.ok
}

// newList reads an array header and makes the list as decodeList does
// (an empty array gives an empty, non-nil list). The element loops are
// written out per type: a function value would make the Reader escape.
func newList[T any](r *Reader) []T {
	n := r.ArrayLen()
	if !r.ok {
		return nil
	}
	return make([]T, n)
}

func (r *Reader) uints() []uint64 {
	out := newList[uint64](r)
	for i := range out {
		out[i] = r.Uint()
	}
	return out
}

func (r *Reader) ints() []int64 {
	out := newList[int64](r)
	for i := range out {
		out[i] = r.Int()
	}
	return out
}

func (r *Reader) strings() []string {
	out := newList[string](r)
	for i := range out {
		out[i] = r.string()
	}
	return out
}

func (r *Reader) ranges() []Range {
	out := newList[Range](r)
	for i := range out {
		readRange(r, &out[i])
	}
	return out
}

func (r *Reader) holders() []Holder {
	out := newList[Holder](r)
	for i := range out {
		readHolder(r, &out[i])
	}
	return out
}

func (r *Reader) waiters() []Waiter {
	out := newList[Waiter](r)
	for i := range out {
		readWaiter(r, &out[i])
	}
	return out
}

func (r *Reader) kvs() []KV {
	out := newList[KV](r)
	for i := range out {
		readKV(r, &out[i])
	}
	return out
}

func (r *Reader) events() []Event {
	out := newList[Event](r)
	for i := range out {
		readEvent(r, &out[i])
	}
	return out
}

func (r *Reader) grants() []Grant {
	out := newList[Grant](r)
	for i := range out {
		readGrant(r, &out[i])
	}
	return out
}

func (r *Reader) shardRevs() []ShardRev {
	out := newList[ShardRev](r)
	for i := range out {
		if r.structLen(2) {
			out[i].Shard = r.Uint()
			out[i].Rev = r.Uint()
		}
	}
	return out
}

func readRange(r *Reader, v *Range) {
	if r.structLen(4) {
		v.Start = r.string()
		v.End = r.string()
		v.Shard = r.Uint()
		v.Gen = r.Uint()
	}
}

// key reads a map key: a positive fixint in place (every key of a request
// or response is one), anything else as Uint.
func (r *Reader) key() uint64 {
	if p := r.pos; p < len(r.b) && r.b[p] < 0x80 {
		r.pos = p + 1
		return uint64(r.b[p])
	}
	return r.Uint()
}

// Request decodes one request into q, as DecodeMsgpack would. On false q
// holds partial data and the input must be decoded by the library.
func (r *Reader) Request(q *Request) bool {
	n := r.mapLen()
	*q = Request{}
	for i := 0; i < n && r.ok; i++ {
		switch r.key() {
		case reqID:
			q.ID = r.Uint()
		case reqOp:
			q.Op = Op(r.Uint())
		case reqPath:
			q.Path = r.string()
		case reqMode:
			q.Mode = Mode(r.Uint())
		case reqLease:
			q.Lease = r.Uint()
		case reqTTL:
			q.TTL = r.Int()
		case reqWait:
			q.Wait = r.Int()
		case reqToken:
			q.Token = r.Uint()
		case reqOwner:
			q.Owner = r.string()
		case reqValue:
			q.Value = r.bytes()
		case reqVersion:
			q.Version = r.Uint()
		case reqRev:
			q.Rev = r.Uint()
		case reqClient:
			q.Client = r.Uint()
		case reqSeq:
			q.Seq = r.Uint()
		case reqAckSeq:
			q.AckSeq = r.Uint()
		case reqGen:
			q.Gen = r.Uint()
		case reqFlags:
			q.Flags = uint32(r.Uint())
		case reqLimit:
			q.Limit = uint32(r.Uint())
		case reqStream:
			q.Stream = r.Uint()
		case reqAuth:
			q.Auth = r.string()
		case reqLeases:
			q.Leases = r.uints()
		case reqRanges:
			q.Ranges = r.ranges()
		case reqShard:
			q.Shard = r.Uint()
		case reqTerm:
			q.Term = r.Uint()
		case reqRemaining:
			q.Remaining = r.ints()
		case reqChunk:
			q.Chunk = uint32(r.Uint())
		case reqToReplica:
			q.ToReplica = r.Uint()
		case reqIdentity:
			q.Identity = r.string()
		case reqLeaseKey:
			q.LeaseKey = r.Uint()
		case reqPaths:
			q.Paths = r.strings()
		case reqGrace:
			q.Grace = r.Int()
		case reqTarget:
			q.Target = r.string()
		case reqPermits:
			q.Permits = uint32(r.Uint())
		case reqLockDelay:
			q.LockDelay = r.Int()
		case reqPriority:
			q.Priority = r.Int()
		case reqPosition:
			q.Position = r.shardRevs()
		case reqTrace:
			q.Trace = r.string()
		default: // unknown fields: the library skips them
			r.ok = false
		}
	}
	return r.ok
}

// Response decodes one response into q, as DecodeMsgpack would. On false q
// holds partial data and the input must be decoded by the library.
func (r *Reader) Response(q *Response) bool {
	n := r.mapLen()
	*q = Response{}
	for i := 0; i < n && r.ok; i++ {
		switch r.key() {
		case respID:
			q.ID = r.Uint()
		case respCode:
			q.Code = Code(r.Uint())
		case respMsg:
			q.Msg = r.string()
		case respToken:
			q.Token = r.Uint()
		case respLease:
			q.Lease = r.Uint()
		case respTTL:
			q.TTL = r.Int()
		case respRev:
			q.Rev = r.Uint()
		case respValue:
			q.Value = r.bytes()
		case respVersion:
			q.Version = r.Uint()
		case respMode:
			q.Mode = Mode(r.Uint())
		case respCount:
			q.Count = uint32(r.Uint())
		case respOwner:
			q.Owner = r.string()
		case respPath:
			q.Path = r.string()
		case respStream:
			q.Stream = r.Uint()
		case respHint:
			q.Hint = r.hint()
		case respHolders:
			q.Holders = r.holders()
		case respWaiters:
			q.Waiters = r.waiters()
		case respKVs:
			q.KVs = r.kvs()
		case respEvents:
			q.Events = r.events()
		case respLeases:
			q.Leases = r.uints()
		case respRanges:
			q.Ranges = r.ranges()
		case respGrants:
			q.Grants = r.grants()
		case respDenied:
			q.Denied = r.uints()
		case respDelayUntil:
			q.DelayUntil = r.Int()
		case respRevokeAt:
			q.RevokeAt = r.Int()
		case respPermits:
			q.Permits = uint32(r.Uint())
		case respPosition:
			q.Position = r.shardRevs()
		default: // Table, Signed and unknown fields: the library's
			r.ok = false
		}
	}
	return r.ok
}

// hint reads the map form with one-letter keys; any other form (array,
// nil, other keys) is left to the library.
func (r *Reader) hint() *Hint {
	n := r.mapLen()
	h := new(Hint)
	for i := 0; i < n && r.ok; i++ {
		if r.byte() != 0xa1 {
			r.ok = false
			break
		}
		switch r.byte() {
		case 's':
			h.Shard = r.Uint()
		case 'g':
			h.Gen = r.Uint()
		case 'l':
			h.Leader = r.string()
		default:
			r.ok = false
		}
	}
	return h
}

func readHolder(r *Reader, h *Holder) {
	if r.structLen(7) {
		h.Owner = r.string()
		h.Lease = r.Uint()
		h.Mode = Mode(r.Uint())
		h.Token = r.Uint()
		h.Count = uint32(r.Uint())
		h.Path = r.string()
		h.TTL = r.Int()
	}
}

func readWaiter(r *Reader, w *Waiter) {
	if r.structLen(6) {
		w.Owner = r.string()
		w.Lease = r.Uint()
		w.Mode = Mode(r.Uint())
		w.Client = r.Uint()
		w.Seq = r.Uint()
		w.Path = r.string()
	}
}

func readKV(r *Reader, kv *KV) {
	if r.structLen(6) {
		kv.Key = r.string()
		kv.Value = r.bytes()
		kv.Version = r.Uint()
		kv.Lease = r.Uint()
		kv.CreateRev = r.Uint()
		kv.ModRev = r.Uint()
	}
}

func readGrant(r *Reader, g *Grant) {
	if r.structLen(6) {
		g.Client = r.Uint()
		g.Seq = r.Uint()
		g.Path = r.string()
		g.Token = r.Uint()
		g.Lease = r.Uint()
		g.Mode = Mode(r.Uint())
	}
}

func readEvent(r *Reader, e *Event) {
	if r.structLen(15) {
		e.Rev = r.Uint()
		e.Kind = EventKind(r.Uint())
		e.Cause = Cause(r.Uint())
		e.Path = r.string()
		e.Mode = Mode(r.Uint())
		e.Token = r.Uint()
		e.Lease = r.Uint()
		e.Owner = r.string()
		e.Value = r.bytes()
		e.Version = r.Uint()
		e.Client = r.Uint()
		e.Seq = r.Uint()
		e.Shard = r.Uint()
		e.Time = r.Int()
		e.TTL = r.Int()
	}
}
