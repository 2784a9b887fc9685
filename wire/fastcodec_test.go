package wire

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// The hand-written codecs (append.go, reader.go) must be the library's
// format exactly: these tests encode randomized values both ways and
// compare bytes, and decode both ways and compare values.

// gen makes random field values that cross every msgpack size boundary.
type gen struct{ r *rand.Rand }

var uintEdges = []uint64{0, 1, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
var intEdges = []int64{0, 1, -1, -32, -33, -128, -129, math.MinInt16, math.MinInt16 - 1, math.MinInt32,
	math.MinInt32 - 1, math.MinInt64, math.MaxInt64, 0x7f, 0x80, math.MaxUint32}

func (g gen) some() bool { return g.r.IntN(2) == 0 }

func (g gen) u64() uint64 {
	if !g.some() {
		return 0
	}
	if g.some() {
		return uintEdges[g.r.IntN(len(uintEdges))]
	}
	return g.r.Uint64() >> g.r.IntN(64)
}

func (g gen) i64() int64 {
	if !g.some() {
		return 0
	}
	if g.some() {
		return intEdges[g.r.IntN(len(intEdges))]
	}
	v := int64(g.r.Uint64() >> g.r.IntN(64))
	if g.some() {
		v = -v
	}
	return v
}

func (g gen) u32() uint32 { return uint32(g.u64()) }
func (g gen) u8() uint8   { return uint8(g.u64()) }

var strLens = []int{0, 1, 5, 31, 32, 255, 256, 70000}

func (g gen) str() string {
	if !g.some() {
		return ""
	}
	n := strLens[g.r.IntN(len(strLens)-1)]
	if g.r.IntN(50) == 0 {
		n = strLens[len(strLens)-1]
	}
	return strings.Repeat(string(rune('a'+g.r.IntN(26))), n)
}

func (g gen) bytes() []byte {
	switch g.r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	return []byte(g.str())
}

// count: nil or 1..3 elements (the encoders leave empty lists out, so an
// empty non-nil list does not round-trip, by design of the format).
func (g gen) count() int {
	if g.r.IntN(3) != 0 {
		return 0
	}
	return 1 + g.r.IntN(3)
}

func genList[T any](g gen, f func() T) []T {
	n := g.count()
	if n == 0 {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = f()
	}
	return out
}

func (g gen) rng() Range { return Range{Start: g.str(), End: g.str(), Shard: g.u64(), Gen: g.u64()} }

func (g gen) request() Request {
	return Request{ID: g.u64(), Op: Op(g.u8()), Path: g.str(), Mode: Mode(g.u8()), Lease: g.u64(), TTL: g.i64(),
		Wait: g.i64(), Token: g.u64(), Owner: g.str(), Value: g.bytes(), Version: g.u64(), Rev: g.u64(),
		Client: g.u64(), Seq: g.u64(), AckSeq: g.u64(), Gen: g.u64(), Flags: g.u32(), Limit: g.u32(),
		Stream: g.u64(), Auth: g.str(), Leases: genList(g, g.u64), Ranges: genList(g, g.rng), Shard: g.u64(),
		Term: g.u64(), Remaining: genList(g, g.i64), Chunk: g.u32(), ToReplica: g.u64(), Identity: g.str(),
		LeaseKey: g.u64(), Paths: genList(g, g.str), Grace: g.i64(), Target: g.str(), Permits: g.u32(),
		LockDelay: g.i64(), Priority: g.i64(), Trace: g.str()}
}

func (g gen) response() Response {
	r := Response{ID: g.u64(), Code: Code(g.u64()), Msg: g.str(), Token: g.u64(), Lease: g.u64(), TTL: g.i64(),
		Rev: g.u64(), Value: g.bytes(), Version: g.u64(), Mode: Mode(g.u8()), Count: g.u32(), Owner: g.str(),
		Path: g.str(), Stream: g.u64(),
		Holders: genList(g, func() Holder {
			return Holder{Owner: g.str(), Lease: g.u64(), Mode: Mode(g.u8()), Token: g.u64(), Count: g.u32(), Path: g.str(), TTL: g.i64()}
		}),
		Waiters: genList(g, func() Waiter {
			return Waiter{Owner: g.str(), Lease: g.u64(), Mode: Mode(g.u8()), Client: g.u64(), Seq: g.u64(), Path: g.str()}
		}),
		KVs: genList(g, func() KV {
			return KV{Key: g.str(), Value: g.bytes(), Version: g.u64(), Lease: g.u64(), CreateRev: g.u64(), ModRev: g.u64()}
		}),
		Events: genList(g, func() Event {
			return Event{Rev: g.u64(), Kind: EventKind(g.u8()), Cause: Cause(g.u8()), Path: g.str(), Mode: Mode(g.u8()),
				Token: g.u64(), Lease: g.u64(), Owner: g.str(), Value: g.bytes(), Version: g.u64(), Client: g.u64(),
				Seq: g.u64(), Shard: g.u64(), Time: g.i64(), TTL: g.i64()}
		}),
		Leases: genList(g, g.u64), Ranges: genList(g, g.rng),
		Grants: genList(g, func() Grant {
			return Grant{Client: g.u64(), Seq: g.u64(), Path: g.str(), Token: g.u64(), Lease: g.u64(), Mode: Mode(g.u8())}
		}),
		Denied: genList(g, g.u64), DelayUntil: g.i64(), RevokeAt: g.i64(), Permits: g.u32()}
	r.Code = Code(uint16(r.Code))
	if g.some() {
		r.Hint = &Hint{Shard: g.u64(), Gen: g.u64(), Leader: g.str()}
	}
	if g.r.IntN(10) == 0 {
		r.Table = &RouteTable{Gen: g.u64(), Depth: int(g.u8()), Ranges: genList(g, g.rng),
			Leaders: []ShardLeader{{Shard: g.u64(), Addr: g.str()}}}
	}
	if g.r.IntN(10) == 0 {
		r.Signed = &SignedGrant{Shard: g.u64(), Expiry: g.i64(), Sig: []byte(g.str()), Mode: Mode(g.u8()), Permits: g.u32()}
	}
	return r
}

func libraryEncode(t testing.TB, v msgpack.CustomEncoder) []byte {
	t.Helper()
	b, err := marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	t.Logf("seed %d", s)
	return s
}

func TestAppendRequestIsTheLibraryEncoding(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(seed(t), 1))}
	for i := 0; i < 5000; i++ {
		req := g.request()
		want := libraryEncode(t, &req)
		got := AppendRequest([]byte{0xee}, &req)
		if !bytes.Equal(got[1:], want) || got[0] != 0xee {
			t.Fatalf("request %d: %+v\nhand:    %x\nlibrary: %x", i, req, got[1:], want)
		}
		// Decoding: the Reader and the library agree, and both give the value back.
		var fast, lib Request
		rd := NewReader(want, i%2 == 0)
		if !rd.Request(&fast) || rd.Len() != 0 {
			t.Fatalf("request %d: the Reader refused the canonical encoding %x", i, want)
		}
		if err := decode(want, &lib); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, lib) || !reflect.DeepEqual(fast, req) {
			t.Fatalf("request %d decodes differently:\nreader  %+v\nlibrary %+v\nwant    %+v", i, fast, lib, req)
		}
	}
}

func TestAppendResponseIsTheLibraryEncoding(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(seed(t), 2))}
	handWritten := 0
	for i := 0; i < 5000; i++ {
		resp := g.response()
		want := libraryEncode(t, &resp)
		got := AppendResponse([]byte{0xee}, &resp)
		if !bytes.Equal(got[1:], want) || got[0] != 0xee {
			t.Fatalf("response %d: %+v\nhand:    %x\nlibrary: %x", i, resp, got[1:], want)
		}
		var fast, lib Response
		if err := decode(want, &lib); err != nil {
			t.Fatal(err)
		}
		if err := DecodeResponse(want, &fast); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, lib) || !reflect.DeepEqual(fast, resp) {
			t.Fatalf("response %d decodes differently:\nfast    %+v\nlibrary %+v\nwant    %+v", i, fast, lib, resp)
		}
		rd := NewReader(want, false)
		var r Response
		ok := rd.Response(&r) && rd.Len() == 0
		if ok != resp.hasHandWrittenForm() {
			t.Fatalf("response %d: Reader accepted=%v, hand-written form=%v", i, ok, resp.hasHandWrittenForm())
		}
		if ok {
			handWritten++
		}
	}
	if handWritten < 3000 {
		t.Fatalf("only %d of 5000 responses took the hand-written road", handWritten)
	}
}

// TestReaderLeavesOddEncodingsToTheLibrary: valid msgpack that our encoders
// never write (wide integers, bin for str, nil lists, structs as maps,
// unknown fields) decodes the same as before, through the library.
func TestReaderLeavesOddEncodingsToTheLibrary(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   []byte
		reader bool // the Reader takes it itself
		want   Request
	}{
		{"wide id", []byte("\x81\x01\xcf\x00\x00\x00\x00\x00\x00\x00\x07"), true, Request{ID: 7}},
		{"key as uint16", []byte("\x81\xcd\x00\x03\xa2/a"), true, Request{Path: "/a"}},
		{"path as bin", []byte("\x81\x03\xc4\x02/a"), true, Request{Path: "/a"}},
		{"nil path", []byte("\x81\x03\xc0"), true, Request{}},
		{"op truncated as DecodeUint8 does", []byte("\x81\x02\xcd\x01\x02"), true, Request{Op: 2}},
		{"empty leases", []byte("\x81\x15\x90"), true, Request{Leases: []uint64{}}},
		{"nil leases", []byte("\x81\x15\xc0"), false, Request{}},
		{"unknown field", []byte("\x82\x3f\xa1x\x01\x05"), false, Request{ID: 5}},
		{"range as a map", []byte("\x81\x16\x91\x81\xa5Start\xa1a"), false, Request{Ranges: []Range{{Start: "a"}}}},
		{"map16 header", []byte("\xde\x00\x01\x01\x05"), true, Request{ID: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q Request
			rd := NewReader(tc.body, true)
			if got := rd.Request(&q) && rd.Len() == 0; got != tc.reader {
				t.Fatalf("Reader accepted=%v, want %v", got, tc.reader)
			}
			var lib Request
			if err := decode(tc.body, &lib); err != nil {
				t.Fatalf("library: %v", err)
			}
			var got Request
			if err := DecodeRequest(tc.body, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(lib, tc.want) {
				t.Fatalf("got %+v, library %+v, want %+v", got, lib, tc.want)
			}
		})
	}
}

// FuzzReaderAgreesWithLibrary: on any bytes, the Reader never panics, and
// whatever it accepts the library accepts as the same value. Whatever it
// refuses, DecodeRequest/DecodeResponse either decode (through the library)
// or refuse as Malformed.
func FuzzReaderAgreesWithLibrary(f *testing.F) {
	g := gen{rand.New(rand.NewPCG(1, 1))}
	for i := 0; i < 8; i++ {
		q, r := g.request(), g.response()
		if b := AppendRequest(nil, &q); len(b) < 4096 {
			f.Add(b)
		}
		if b := AppendResponse(nil, &r); len(b) < 4096 {
			f.Add(b)
		}
	}
	for _, s := range responseSeeds() {
		f.Add(s)
	}
	f.Add([]byte("\x81\x16\x91\x94\xa1a\xa1b\x01\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var q, lq Request
		rd := NewReader(b, len(b)%2 == 0)
		if rd.Request(&q) && rd.Len() == 0 {
			if err := decode(b, &lq); err != nil {
				t.Fatalf("Reader accepted what the library refuses (%v): %x", err, b)
			}
			if !reflect.DeepEqual(q, lq) {
				t.Fatalf("request differs:\nreader  %+v\nlibrary %+v", q, lq)
			}
		}
		if err := DecodeRequest(b, &q); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("request error is not Malformed: %v", err)
		}
		var r, lr Response
		rd = NewReader(b, len(b)%2 == 1)
		if rd.Response(&r) && rd.Len() == 0 {
			if err := decode(b, &lr); err != nil {
				t.Fatalf("Reader accepted what the library refuses (%v): %x", err, b)
			}
			if !reflect.DeepEqual(r, lr) {
				t.Fatalf("response differs:\nreader  %+v\nlibrary %+v", r, lr)
			}
		}
		if err := DecodeResponse(b, &r); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("response error is not Malformed: %v", err)
		}
	})
}

var benchReq = Request{ID: 12345, Op: OpAcquire, Path: "/bench/worker-17/lock-9", Lease: 1<<62 + 77, TTL: 10000,
	Wait: WaitNone, Owner: "w17", Client: 1<<40 + 3, Seq: 99999, AckSeq: 99990, Gen: 3, Identity: "svc"}

var benchResp = Response{ID: 12345, Token: 1 << 33, Lease: 1<<62 + 77, TTL: 10000, Rev: 777777,
	Count: 1, Owner: "w17", Path: "/bench/worker-17/lock-9"}

func BenchmarkCodec(b *testing.B) {
	req, resp := benchReq, benchResp
	b.Run("request/encode/library", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, _ = marshal(&req)
		}
	})
	b.Run("request/encode/append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for i := 0; i < b.N; i++ {
			buf = AppendRequest(buf[:0], &req)
		}
	})
	body := AppendRequest(nil, &req)
	b.Run("request/decode/library", func(b *testing.B) {
		b.ReportAllocs()
		var q Request
		for i := 0; i < b.N; i++ {
			_ = decode(body, &q)
		}
	})
	b.Run("request/decode/reader", func(b *testing.B) {
		b.ReportAllocs()
		var q Request
		for i := 0; i < b.N; i++ {
			_ = DecodeRequest(body, &q)
		}
	})
	b.Run("response/encode/library", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, _ = marshal(&resp)
		}
	})
	b.Run("response/encode/append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 256)
		for i := 0; i < b.N; i++ {
			buf = AppendResponse(buf[:0], &resp)
		}
	})
	rbody := AppendResponse(nil, &resp)
	b.Run("response/decode/library", func(b *testing.B) {
		b.ReportAllocs()
		var r Response
		for i := 0; i < b.N; i++ {
			_ = decode(rbody, &r)
		}
	})
	b.Run("response/decode/reader", func(b *testing.B) {
		b.ReportAllocs()
		var r Response
		for i := 0; i < b.N; i++ {
			_ = DecodeResponse(rbody, &r)
		}
	})
}
