package statemachine

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/wardenlock/warden/wire"
)

func TestBatchAnswersEachOpInOrder(t *testing.T) {
	h := newHarness(t)
	ops := []*wire.Request{
		{ID: 1, Op: wire.OpAcquire, Path: "/l/a", Lease: 1, TTL: 5000},
		{ID: 2, Op: wire.OpAcquire, Path: "/l/a", Lease: 2, TTL: 5000},
		{ID: 3, Op: wire.OpAcquire, Path: "bad", Lease: 2, TTL: 5000},
		{ID: 4, Op: wire.OpAcquire, Path: "/l/b", Lease: 2, TTL: 5000},
	}
	cmd, _ := EncodeCommand(nil, h.now, ops)
	h.index++
	res, err := h.sm.Update(sm.Entry{Index: h.index, Cmd: cmd})
	if err != nil || res.Value != 4 {
		t.Fatalf("Update = %d, %v", res.Value, err)
	}
	out, _ := DecodeResults(res.Data)
	want := []wire.Code{wire.OK, wire.Conflict, wire.InvalidArgument, wire.OK}
	for i, r := range out {
		if r.ID != uint64(i+1) || r.Code != want[i] {
			t.Fatalf("op %d: id %d code %v, want id %d code %v", i, r.ID, r.Code, i+1, want[i])
		}
	}
}

func TestMalformedEntries(t *testing.T) {
	good, _ := EncodeCommand(nil, 5, []*wire.Request{acq("/l/a", ex, 1, "o")})
	cases := map[string][]byte{
		"empty":          {},
		"one byte":       {1},
		"bad version":    append([]byte{9}, good[1:]...),
		"bad kind":       append([]byte{1, 9}, good[2:]...),
		"truncated":      good[:len(good)-3],
		"trailing bytes": append(append([]byte{}, good...), 0xc0),
		"huge count":     {1, 1, 0x05, 0xdd, 0x7f, 0xff, 0xff, 0xff},
	}
	for name, cmd := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			before := snapshot(t, h.sm)
			h.index++
			res, err := h.sm.Update(sm.Entry{Index: h.index, Cmd: cmd})
			if err != nil || res.Value != 0 {
				t.Fatalf("Update = %d, %v", res.Value, err)
			}
			out, err := DecodeResults(res.Data)
			if err != nil || len(out) != 1 || out[0].Code != wire.Malformed {
				t.Fatalf("results %+v, %v", out, err)
			}
			h.sm.applied-- // the index is the only thing a bad entry may change
			if string(before) != string(snapshot(t, h.sm)) {
				t.Fatal("a malformed entry changed state")
			}
		})
	}
}

func TestEncodeCommandRefusesNil(t *testing.T) {
	if _, err := EncodeCommand(nil, 1, []*wire.Request{nil}); err == nil {
		t.Fatal("nil op encoded")
	}
}

func TestObserverSeesEachEntry(t *testing.T) {
	h := newHarness(t)
	var calls []uint64
	h.sm.SetObserver(observerFunc(func(i uint64, evs []wire.Event) { calls = append(calls, i) }))
	h.mustOK(acq("/l/a", ex, 1, "o"))                // events
	h.expect(acq("/l/a", ex, 1, "p"), wire.Conflict) // no events: no call
	if len(calls) != 1 || calls[0] != h.index-1 {
		t.Fatalf("observer calls %v (index now %d)", calls, h.index)
	}
}

type observerFunc func(uint64, []wire.Event)

func (f observerFunc) Applied(i uint64, evs []wire.Event) { f(i, evs) }

func TestConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero config must be valid (defaults): %v", err)
	}
	bad := []Config{{MinTTL: -1}, {MinTTL: 5000, MaxTTL: 10}, {MaxWaiters: -3}, {TombstoneMs: -1}}
	for _, c := range bad {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if d := (Config{}).withDefaults(); d.SplitDepth != 2 || d.MaxValue != 4096 || d.MinTTL != 1000 {
		t.Fatalf("defaults %+v", d)
	}
}

// TestFastCodecMatchesMsgpack: the hand-written reader decodes what the
// library decodes, and the writer writes the library's bytes.
func TestFastCodecMatchesMsgpack(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	big := func() uint64 {
		switch rng.IntN(6) {
		case 0:
			return 0
		case 1:
			return uint64(rng.IntN(128))
		case 2:
			return uint64(rng.IntN(1 << 16))
		case 3:
			return uint64(rng.Uint32())
		case 4:
			return SingleLeaseBit | rng.Uint64()
		}
		return rng.Uint64()
	}
	str := func() string {
		return strings.Repeat("x", []int{0, 1, 31, 32, 255, 256, 70000}[rng.IntN(7)])
	}
	val := func() []byte {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		return []byte(str())
	}
	s := New(testConfig())
	for i := 0; i < 2000; i++ {
		var ops []*wire.Request
		for j := rng.IntN(20); j >= 0; j-- {
			ops = append(ops, &wire.Request{ID: big(), Op: wire.Op(rng.IntN(30)), Path: str(), Mode: wire.Mode(rng.IntN(3)),
				Lease: big(), TTL: int64(big()), Wait: -int64(big()), Token: big(), Owner: str(), Value: val(),
				Version: big(), Rev: big(), Client: big(), Seq: big(), AckSeq: big(), Gen: big(),
				Flags: uint32(big()), Limit: uint32(big()), Stream: big(), Auth: str(), Shard: big()})
		}
		cmd, err := EncodeCommand(nil, -int64(big()), ops)
		if err != nil {
			t.Fatal(err)
		}
		fastNow, ok := s.fastDecode(cmd[2:])
		if !ok {
			t.Fatalf("entry %d: the fast reader gave up on a well-formed entry", i)
		}
		fast := slices.Clone(s.reqs)
		rd := bytes.NewReader(cmd[2:])
		dec := msgpack.NewDecoder(rd)
		now, _ := dec.DecodeInt64()
		n, _ := dec.DecodeArrayLen()
		if now != fastNow || n != len(fast) {
			t.Fatalf("entry %d: now %d/%d, %d/%d ops", i, fastNow, now, len(fast), n)
		}
		for j := range fast {
			var want wire.Request
			if err := want.DecodeMsgpack(dec); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fast[j], want) {
				t.Fatalf("entry %d op %d: fast %+v\nlibrary %+v", i, j, fast[j], want)
			}
		}

		resp := wire.Response{ID: big(), Code: wire.Code(rng.IntN(40)), Msg: str(), Token: big(), Lease: big(),
			TTL: int64(big()) * int64(1-2*rng.IntN(2)), Rev: big(), Value: val(), Version: big(), Mode: wire.Mode(rng.IntN(3)),
			Count: uint32(big()), Owner: str(), Path: str(), Stream: big()}
		for j := rng.IntN(3) * rng.IntN(20); j > 0; j-- {
			resp.Grants = append(resp.Grants, wire.Grant{Client: big(), Seq: big(), Path: str(), Token: big(),
				Lease: big(), Mode: wire.Mode(rng.IntN(3))})
		}
		var lib bytes.Buffer
		enc := msgpack.NewEncoder(&lib)
		enc.UseCompactInts(true)
		if err := resp.EncodeMsgpack(enc); err != nil {
			t.Fatal(err)
		}
		if got := wire.AppendResponse(nil, &resp); !bytes.Equal(got, lib.Bytes()) {
			t.Fatalf("response %d: fast writer %x\nlibrary %x", i, got, lib.Bytes())
		}
	}
}

// TestFastReaderFallsBack: odd but valid encodings still decode (through
// the library), and garbage is refused as before.
func TestFastReaderFallsBack(t *testing.T) {
	var buf bytes.Buffer
	buf.Write([]byte{commandVersion, kindBatch})
	enc := msgpack.NewEncoder(&buf)
	_ = enc.EncodeInt64(5) // fixed-width ints
	_ = enc.EncodeArrayLen(1)
	_ = enc.EncodeMapLen(4)
	_ = enc.EncodeUint64(2)
	_ = enc.EncodeUint64(uint64(wire.OpAcquire))
	_ = enc.EncodeUint64(3)
	_ = enc.EncodeString("/l/a")
	_ = enc.EncodeUint64(5)
	_ = enc.EncodeUint64(1)
	_ = enc.EncodeUint64(99) // an unknown field: the library skips it
	_ = enc.EncodeString("future")
	h := newHarness(t)
	h.now = 5
	if r := h.raw(buf.Bytes()); len(r) != 1 || r[0].Code != wire.InvalidArgument {
		t.Fatalf("got %+v, want the acquire applied (ttl 0 is refused)", r)
	}
}
