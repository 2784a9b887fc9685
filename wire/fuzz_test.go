package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// fuzzMaxFrame is small so the fuzzer reaches both the accept and the
// oversize paths of ReadFrame with short inputs.
const fuzzMaxFrame = 64

// FuzzReadFrame reads frames from arbitrary bytes until the input runs out.
// It checks that no body exceeds the limit, that an oversized frame is
// reported with its declared size (and that a skipped body keeps the stream
// in step, and happens only within the skip bound), and that every accepted
// body decodes or is refused as Malformed.
func FuzzReadFrame(f *testing.F) {
	for _, seed := range frameSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		var buf []byte
		consumed := 0
		// Odd-length inputs read as a server that never skips an oversized
		// body; even ones skip bodies up to 4x the limit.
		skip := 4 * fuzzMaxFrame
		if len(data)%2 == 1 {
			skip = 0
		}
		for {
			body, err := ReadFrameSkip(r, fuzzMaxFrame, skip, buf)
			var fse *FrameSizeError
			switch {
			case errors.As(err, &fse):
				if fse.Size <= fse.Max || fse.Max != fuzzMaxFrame {
					t.Fatalf("oversize error for a legal frame: %+v", fse)
				}
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("FrameSizeError is not TooLarge: %v", err)
				}
				if fse.Skipped && fse.Size > skip {
					t.Fatalf("skipped a %d-byte body with a skip bound of %d", fse.Size, skip)
				}
				if !fse.Skipped {
					return
				}
				consumed += FrameHeaderSize + fse.Size
				if consumed > len(data) {
					t.Fatalf("skipped %d bytes of a %d-byte input", consumed, len(data))
				}
				continue
			case err != nil:
				return
			}
			if len(body) > fuzzMaxFrame {
				t.Fatalf("body of %d bytes over the %d limit", len(body), fuzzMaxFrame)
			}
			consumed += FrameHeaderSize + len(body)
			var req Request
			if err := DecodeRequest(body, &req); err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("decode error is not Malformed: %v", err)
			}
			buf = body
		}
	})
}

// FuzzDecodeResponse is the client side: a response decoder fed arbitrary
// bytes must refuse them as Malformed or produce a value that re-encodes and
// decodes to the same thing.
func FuzzDecodeResponse(f *testing.F) {
	for _, seed := range responseSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Response
		if err := DecodeResponse(b, &r); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("decode error is not Malformed: %v", err)
			}
			return
		}
		out, err := MarshalResponse(&r)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var again Response
		if err := DecodeResponse(out, &again); err != nil {
			t.Fatalf("decode of re-encoded response: %v", err)
		}
		out2, err := MarshalResponse(&again)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("re-encoding is not stable: %v\n%x\n%x", err, out, out2)
		}
	})
}

func frameSeeds() [][]byte {
	req := func(r Request) []byte {
		b, _ := AppendFrame(nil, &r)
		return b
	}
	two := append(req(Request{ID: 1, Op: OpHello, Rev: ProtocolVersion, Auth: "token"}),
		req(Request{ID: 2, Op: OpAcquire, Path: "/a/b", TTL: 1000})...)
	over := binary.BigEndian.AppendUint32(nil, fuzzMaxFrame+1)
	over = append(over, make([]byte, fuzzMaxFrame+1)...)
	over = append(over, req(Request{ID: 3, Op: OpRelease, Path: "/a", Token: 9})...)
	return [][]byte{
		two,
		over,
		{0xff, 0xff, 0xff, 0xff},
		{0, 0, 0, 1, 0xc1},
		{0, 0, 0, 0},
	}
}

func responseSeeds() [][]byte {
	resp := func(r Response) []byte {
		b, _ := MarshalResponse(&r)
		return b
	}
	return [][]byte{
		resp(Response{ID: 9, Code: Conflict, Msg: "held", Token: 42, Hint: &Hint{Shard: 3, Gen: 2, Leader: "n1"}}),
		resp(Response{Stream: 4, Events: []Event{{Rev: 1, Kind: EvReleased, Cause: CauseExpired, Path: "/a", Token: 7}}}),
		resp(Response{Holders: []Holder{{Owner: "o", Lease: 5, Mode: Shared, Token: 7, Count: 2, Path: "/a"}},
			Waiters: []Waiter{{Owner: "w", Lease: 6, Client: 1, Seq: 2, Path: "/a"}}}),
		resp(Response{KVs: []KV{{Key: "/k", Value: []byte{1}, Version: 2}}, Leases: []uint64{1, 2},
			Ranges: []Range{{Start: "a", End: "b", Shard: 2, Gen: 1}}, Grants: []Grant{{Client: 1, Seq: 2, Path: "/a", Token: 8}}}),
		{0x80},
	}
}

// TestFuzzSeedsAreWellFormed keeps the seeds meaningful: each decodes.
func TestFuzzSeedsAreWellFormed(t *testing.T) {
	for i, s := range responseSeeds() {
		var r Response
		if err := DecodeResponse(s, &r); err != nil {
			t.Fatalf("response seed %d: %v", i, err)
		}
		out, _ := MarshalResponse(&r)
		var again Response
		if err := DecodeResponse(out, &again); err != nil || !reflect.DeepEqual(r, again) {
			t.Fatalf("response seed %d does not round-trip: %v", i, err)
		}
	}
}

// TestLyingListLengthsAreRefused: regression for the fuzzers' first finds.
// A list header may claim billions of elements in a few bytes; decoding must
// refuse it as Malformed instead of allocating for the claim (msgpack v5.4.1
// sized a reflected slice from the header: 4e9 KVs in a 10-byte frame took a
// 290 GB allocation and killed the process).
func TestLyingListLengthsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
		resp bool
	}{
		{"response KVs", []byte("\x84\x12\xdd\xf1\xba\x91\x00\x01\x01\x00"), true},
		{"response Holders", []byte("\x81\x10\xdd\x0f\xff\xff\xff\x90"), true},
		{"response Events", []byte("\x81\x13\xdd\xff\xff\xff\xff\x90"), true},
		{"response Leases", []byte("\x81\x14\xdd\xff\xff\xff\xff\x01"), true},
		{"request Ranges", []byte("\x81\x16\xdd\x0f\xff\xff\xff\x90"), false},
		{"request Leases", []byte("\x81\x15\xdd\xff\xff\xff\xff\x01"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.resp {
				err = DecodeResponse(tc.body, new(Response))
			} else {
				err = DecodeRequest(tc.body, new(Request))
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want Malformed", err)
			}
		})
	}
}

// TestLyingByteLengthsAreRefused: regression for the second round of finds.
// msgpack v5.4.1 allocates a bin's declared length before reading it, so a
// 7-byte request whose Value claims 4 GiB made the node allocate 4 GiB (and
// die when it could not). checkClaims refuses such frames before decoding.
func TestLyingByteLengthsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
		resp bool
	}{
		{"request Value bin32", []byte("\x81\x0a\xc6\xff\xff\xff\xff"), false},
		{"request Path str32", []byte("\x81\x03\xdb\xff\xff\xff\xff"), false},
		{"request unknown field ext32", []byte("\x81\x3f\xc9\xff\xff\xff\xf0\x01"), false},
		{"response KV value", []byte("\x84\x12\x91\x96\xa200\xc6\xc6\xc6000\xc6\xc6\xc6000\x15"), true},
		{"response Value bin32", []byte("\x81\x08\xc6\xc6\xc6\x30\x30"), true},
		{"map claiming more pairs than bytes", []byte("\xdf\x7f\xff\xff\xff\x01\x01"), false},
		{"deep nesting", append(bytes.Repeat([]byte{0x91}, 1<<16), 0x01), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.resp {
				err = DecodeResponse(tc.body, new(Response))
			} else {
				err = DecodeRequest(tc.body, new(Request))
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want Malformed", err)
			}
		})
	}
}

func TestCheckClaimsAcceptsEveryValidFrame(t *testing.T) {
	for i, s := range append(responseSeeds(), frameSeeds()[0][4:]) {
		if err := checkClaims(s); err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
	}
}

// TestLyingExtBehindATopLevelExt: regression for the third round. msgpack
// reads an ext header in front of the top-level map as part of it, so the
// claims check must walk every value of the body; a huge ext in a skipped
// field used to grow the pooled decoder's buffer by 1 MiB per frame until
// decoding took seconds (the fuzzer's "hung" workers).
func TestLyingExtBehindATopLevelExt(t *testing.T) {
	body := []byte("\xc8\x00\x000\x8d000\xc9\xec4A\x9f`")
	for i := 0; i < 200; i++ {
		if err := DecodeRequest(body, new(Request)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("got %v, want Malformed", err)
		}
	}
	if err := checkClaims(body); err == nil {
		t.Fatal("checkClaims passed an ext32 claiming 3.9 GB in a 14-byte body")
	}
}
