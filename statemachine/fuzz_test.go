package statemachine

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/wardenlock/warden/wire"
)

// FuzzApply feeds arbitrary bytes to Update twice over: as a raw entry, and
// as a program of small op descriptors turned into well-formed requests, so
// the fuzzer reaches deep lock states as well as the decoder. The harness
// checks every invariant (and that nothing panicked) after each entry.
// Limits are small so they are reached; before each op the pre-proposal
// check (LimitCheck) is asked too, and whatever it refuses, apply must not
// grant or queue.
func FuzzApply(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	cfg := testConfig()
	cfg.MaxWaiters, cfg.MaxLeaseLock = 3, 4
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newHarnessWith(t, cfg)
		h.raw(data)
		prog := data
		for len(prog) >= 4 {
			h.now += int64(prog[3])
			op := fuzzOp(prog[:4])
			v, err := h.sm.Lookup(LimitCheck{Req: op})
			if err != nil {
				t.Fatal(err)
			}
			refused := v.(LimitResult).Err
			resp := h.entry(op)[0]
			if refused != nil && (resp.Code == wire.OK || resp.Code == wire.Queued) {
				t.Fatalf("%v %s: precheck refused (%v) what apply answered %v", op.Op, op.Path, refused, resp.Code)
			}
			prog = prog[4:]
		}
		// A snapshot of whatever state this reached must round-trip.
		snap := snapshot(t, h.sm)
		r := New(cfg)
		if err := r.RecoverFromSnapshot(bytesReader(snap), nil, nil); err != nil {
			t.Fatal(err)
		}
		if string(snapshot(t, r)) != string(snap) {
			t.Fatal("snapshot does not round-trip")
		}
	})
}

var fuzzIdentities = [4]string{"", "alice", "bob", ""}

// fuzzLeases are session lease ids proven by the keys 1..4 (wire.LeaseID).
var fuzzLeases = [5]uint64{0, wire.LeaseID(1), wire.LeaseID(2), wire.LeaseID(3), wire.LeaseID(4)}

var fuzzPaths = []string{"/a", "/a/b", "/a/b/c", "/a/d", "/e", "/e/f", "/", "/a//x"}

// fuzzOp turns 4 bytes into one request: op, path, mode/lease/owner, token.
func fuzzOp(b []byte) *wire.Request {
	lease := uint64(b[2]>>2) % 5
	r := &wire.Request{Path: fuzzPaths[int(b[1])%len(fuzzPaths)], Mode: wire.Mode(b[2] & 3), Lease: fuzzLeases[lease],
		Owner: fmt.Sprint(b[2] >> 6), TTL: 5000, Token: uint64(b[3] % 40), Client: uint64(b[3] % 3), Seq: uint64(b[1])}
	if lease != 0 && b[3]&0x40 == 0 {
		r.LeaseKey = lease // the owner's request; without it, a squat (owners.go)
	}
	if b[2]&0x10 != 0 {
		r.Wait = wire.WaitForever
	}
	r.Identity = fuzzIdentities[b[1]>>6] // bound leases (owners.go)
	ops := []wire.Op{wire.OpAcquire, wire.OpAcquire, wire.OpAcquire, wire.OpRelease, wire.OpRelease, wire.OpRenew,
		wire.OpRevoke, wire.OpExpire, wire.OpCancel, wire.OpKVPut, wire.OpKVDelete, wire.OpCampaign, wire.OpProclaim,
		wire.OpResign, wire.OpRaiseFence, wire.OpSession, wire.OpNoop, wire.OpAcquireMulti, wire.OpRevokeLock,
		wire.OpHandOver, wire.OpDeadlines, wire.Op(b[0])}
	r.Op = ops[int(b[0])%len(ops)]
	if r.Op == wire.OpKVPut || r.Op == wire.OpCampaign {
		r.Value = b[:1+int(b[3])%3]
	}
	if r.Op == wire.OpRevoke || r.Op == wire.OpExpire {
		if b[3]&1 != 0 {
			r.Lease = SingleLeaseBit | r.Token
		}
	}
	switch r.Op {
	case wire.OpAcquire:
		r.Permits = uint32(b[3] % 4 / 2 * 2) // 0 or 2
		r.LockDelay = int64(b[3]%5) * 100
		if b[3]&0x20 != 0 {
			r.Flags |= wire.FlagRevocable
		}
	case wire.OpAcquireMulti:
		r.Paths = []string{r.Path, fuzzPaths[int(b[3])%len(fuzzPaths)]}
	case wire.OpRevokeLock:
		r.Grace = int64(b[3]%3) * 200
		if b[3]&0x10 != 0 {
			r.Flags |= wire.FlagForce
		}
	case wire.OpHandOver:
		r.Target = fmt.Sprint(b[3] >> 6)
	case wire.OpCampaign:
		r.Priority = int64(b[3] % 3)
	}
	if r.Op == wire.OpRaiseFence {
		r.Token = uint64(b[3])
	}
	return r
}

func fuzzSeeds() [][]byte {
	enc := func(ops ...*wire.Request) []byte {
		b, _ := EncodeCommand(nil, 1_000_000, ops)
		return b
	}
	prog := make([]byte, 0, 64)
	for i := 0; i < 16; i++ {
		prog = binary.BigEndian.AppendUint32(prog, uint32(i*0x01030507+0x00102030))
	}
	return [][]byte{
		enc(acq("/a", ex, 1, "o")),
		enc(acq("/a/b", sh, 0, ""), wait(with(acq("/a", ex, 2, "p"), 1, 1)), rel("/a/b", 1)),
		enc(put("/k", "v", 3), revoke(3), campaign("/e", 1, "c", "x")),
		enc(&wire.Request{Op: wire.OpRaiseFence, Token: 99}, cancelReq(1, 1)),
		{1, 1, 0x00, 0x91, 0x80},
		prog,
	}
}

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzApply when
// WARDEN_WRITE_CORPUS=1; otherwise it checks the committed corpus exists.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzApply")
	if os.Getenv("WARDEN_WRITE_CORPUS") == "" {
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) < len(fuzzSeeds()) {
			t.Fatalf("seed corpus missing in %s (run with WARDEN_WRITE_CORPUS=1): %v", dir, err)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, seed := range fuzzSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", seed)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
