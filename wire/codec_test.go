package wire

import (
	"bufio"
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestRequestRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		req  Request
	}{
		{"empty", Request{}},
		{"acquire", Request{ID: 7, Op: OpAcquire, Path: "/locks/billing/job-7", Mode: Shared,
			Lease: 1 << 60, TTL: 10000, Wait: WaitForever, Owner: "w1", Client: 99, Seq: 3, AckSeq: 2, Gen: 4}},
		{"kv", Request{ID: 1, Op: OpKVPut, Path: "/a", Value: []byte("v"), Version: 3, Flags: FlagHasExpect}},
		{"lists", Request{Op: OpSetRanges, Leases: []uint64{1, 2},
			Ranges: []Range{{Start: "a", End: "b", Shard: 2, Gen: 1}}}},
		{"features", Request{Op: OpAcquireMulti, Paths: []string{"/a/x", "/b/y"}, Grace: 1500, Target: "node-b",
			Permits: 3, LockDelay: LockDelayNone, Priority: -2, Flags: FlagRevocable | FlagForce}},
		{"internal", Request{Op: OpLeaderTransfer, Shard: 3, ToReplica: 1<<20 | 4, Chunk: 2}},
		{"withdraw a multi-lock", Request{ID: 4, Op: OpCancel, Path: "/a/x", Paths: []string{"/a/x", "/a/y"},
			Lease: 77, Owner: "w", Client: 9, Seq: 12}},
		{"hold stream", Request{ID: 2, Op: OpHolds}},
		{"trace", Request{ID: 3, Op: OpAcquire, Path: "/t",
			Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;congo=t61rcWkgMzE"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			frame, err := AppendFrame(nil, &tc.req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := ReadFrame(bufio.NewReader(bytes.NewReader(frame)), DefaultMaxFrame, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got Request
			if err := DecodeRequest(body, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.req) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tc.req)
			}
		})
	}
}

func TestResponseRoundTrip(t *testing.T) {
	resp := Response{ID: 9, Code: Conflict, Msg: "held", Token: 42, Hint: &Hint{Shard: 3, Gen: 2, Leader: "n1"},
		Holders: []Holder{{Owner: "o", Lease: 5, Mode: Shared, Token: 7, Count: 2, Path: "/a"}},
		Events:  []Event{{Rev: 1, Kind: EvReleased, Cause: CauseExpired, Path: "/a", Token: 7}},
		Grants:  []Grant{{Client: 1, Seq: 2, Path: "/a", Token: 8}}, KVs: []KV{{Key: "/k", Value: []byte{1}}},
		DelayUntil: 1_700_000_000_000, RevokeAt: 1_700_000_001_000, Permits: 4}
	b, err := MarshalResponse(&resp)
	if err != nil {
		t.Fatal(err)
	}
	var got Response
	if err := DecodeResponse(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, resp) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, resp)
	}
}

// TestHoldNoticesRoundTrip: a keepalive answer carrying notices and a push
// on a hold stream, through both encoders and the decoder.
func TestHoldNoticesRoundTrip(t *testing.T) {
	notice := Event{Rev: 9, Kind: EvReleased, Cause: CauseResigned, Path: "/e/x", Token: 31, Lease: 5,
		Owner: "a", Client: 77, Seq: 4, Shard: 2, Time: 1_700_000_000_000}
	for _, resp := range []Response{
		{ID: 3, Leases: []uint64{8}, Denied: []uint64{9}, Events: []Event{notice}},
		{Stream: 2, Events: []Event{notice, {Rev: 10, Kind: EvLeaseEnd, Cause: CauseExpired, Lease: 5, Shard: 2}}},
	} {
		for name, b := range map[string][]byte{"fast": AppendResponse(nil, &resp), "msgpack": mustMarshal(t, &resp)} {
			var got Response
			if err := DecodeResponse(b, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, resp) {
				t.Fatalf("%s encoder:\n got %+v\nwant %+v", name, got, resp)
			}
		}
	}
}

func mustMarshal(t *testing.T, r *Response) []byte {
	t.Helper()
	b, err := marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadFrameRefusesOversizeBeforeAllocating(t *testing.T) {
	hdr := []byte{0x7f, 0xff, 0xff, 0xff}
	_, err := ReadFrame(bufio.NewReader(bytes.NewReader(hdr)), 1024, nil)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want TooLarge", err)
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, body := range [][]byte{{0xc1}, {0x81, 0x01}, {0x81, 0x03, 0x01}, {0x80, 0x80}} {
		var r Request
		if err := DecodeRequest(body, &r); !errors.Is(err, ErrMalformed) {
			t.Fatalf("body %x: got %v, want Malformed", body, err)
		}
	}
}

func TestErrorIs(t *testing.T) {
	err := Errorf(StaleToken, "token 3 is not current (5)")
	if !errors.Is(err, ErrStaleToken) || errors.Is(err, ErrNotHolder) {
		t.Fatalf("errors.Is mismatch for %v", err)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	seed, _ := MarshalRequest(&Request{ID: 1, Op: OpAcquire, Path: "/a/b", Ranges: []Range{{Start: "a"}}})
	f.Add(seed)
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		if err := DecodeRequest(b, &r); err != nil {
			return
		}
		out, err := MarshalRequest(&r)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var again Request
		if err := DecodeRequest(out, &again); err != nil {
			t.Fatalf("decode of re-encoded request: %v", err)
		}
	})
}

// TestSignedGrantArrays: a signed grant is an array a decoder reads
// whatever elements a newer version appends, and one without the mode and
// the permits (three elements) still decodes.
func TestSignedGrantArrays(t *testing.T) {
	in := Response{ID: 1, Token: 9, Signed: &SignedGrant{Shard: 3, Expiry: 1234, Sig: []byte("sig"), Mode: Shared, Permits: 4}}
	b, err := msgpack.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var out Response
	if err := msgpack.Unmarshal(b, &out); err != nil || out.Signed == nil {
		t.Fatalf("round trip: %v %+v", err, out.Signed)
	}
	if g := out.Signed; g.Shard != 3 || g.Expiry != 1234 || string(g.Sig) != "sig" || g.Mode != Shared || g.Permits != 4 {
		t.Fatalf("decoded %+v", g)
	}
	for _, elems := range [][]any{
		{uint64(3), int64(1234), []byte("sig")},
		{uint64(3), int64(1234), []byte("sig"), uint8(1), uint32(4), "appended later", 77},
	} {
		raw, _ := msgpack.Marshal(elems)
		var g SignedGrant
		if err := msgpack.Unmarshal(raw, &g); err != nil || g.Shard != 3 || g.Expiry != 1234 || string(g.Sig) != "sig" {
			t.Fatalf("%d elements: %v %+v", len(elems), err, g)
		}
	}
	var g SignedGrant
	short, _ := msgpack.Marshal([]any{uint64(3), int64(1)})
	if err := msgpack.Unmarshal(short, &g); err == nil {
		t.Fatal("a two-element signed grant decoded")
	}
}
