package wire

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// Language-neutral wire vectors: testdata/vectors/*.json hold frames as
// hex beside their decoded fields, and every client implementation (this
// package, clients/python) checks its encoder and decoder against the same
// files. `go test ./wire -run TestVectors -update` rewrites them from the
// tables below; without -update the files must match the tables and the
// codecs (the library's and the hand-written one) must agree with every
// vector. testdata/vectors/README.md describes the JSON form.

var updateVectors = flag.Bool("update", false, "rewrite testdata/vectors from the tables in vectors_test.go")

const vectorDir = "testdata/vectors"

// msgVector is one request or response. Decode-only vectors hold bytes no
// encoder writes (wide integers, unknown fields, longer records): decoders
// must still give the fields.
type msgVector struct {
	name, note string
	req        *Request
	resp       *Response
	body       []byte // decode-only: the body as written by hand
}

func reqV(name string, r Request) msgVector    { return msgVector{name: name, req: &r} }
func respV(name string, r Response) msgVector  { return msgVector{name: name, resp: &r} }
func (v msgVector) with(note string) msgVector { v.note = note; return v }

const (
	vClient = 0x9e3779b97f4a7c15
	vLease  = 0x2d1c4b5a69788796
	vKey    = 0x0123456789abcdef
)

var requestVectors = []msgVector{
	reqV("empty", Request{}).with("every field zero: an empty map"),
	reqV("hello", Request{ID: 1, Op: OpHello, Rev: ProtocolVersion, Auth: "s3cr3t-dev-token", Client: vClient}),
	reqV("hello-peer", Request{ID: 1, Op: OpHello, Rev: ProtocolVersion, Flags: FlagPeer, Client: 1}),
	reqV("acquire-session-forever", Request{ID: 7, Op: OpAcquire, Path: "/locks/billing/nightly", Lease: vLease,
		TTL: 10000, Wait: WaitForever, Owner: "3f2a9c1b", Client: vClient, Seq: 12, AckSeq: 10, LeaseKey: vKey,
		Flags: FlagRevocable | FlagSigned, LockDelay: 5000}),
	reqV("acquire-single-try-shared", Request{ID: 8, Op: OpAcquire, Path: "/locks/reports", Mode: Shared,
		TTL: 30000, Wait: WaitNone, Client: vClient, Seq: 13, AckSeq: 13, LockDelay: LockDelayNone}),
	reqV("acquire-semaphore", Request{ID: 9, Op: OpAcquire, Path: "/pools/db/conns", Mode: Shared, Lease: vLease,
		TTL: 10000, Wait: 2500, Owner: "permit-1", Permits: 10, Client: vClient, Seq: 14, AckSeq: 13, LeaseKey: vKey}),
	reqV("release", Request{ID: 10, Op: OpRelease, Path: "/locks/billing/nightly", Token: 9031, Lease: vLease,
		Owner: "3f2a9c1b", Client: vClient, Seq: 15, AckSeq: 15}),
	reqV("renew", Request{ID: 11, Op: OpRenew, Path: "/locks/reports", Token: 1 << 40, TTL: 600000,
		Client: vClient, Seq: 16, AckSeq: 16}),
	reqV("keepalive", Request{ID: 12, Op: OpKeepAlive, Lease: vLease, TTL: 10000}),
	reqV("keepalive-leases", Request{ID: 13, Op: OpKeepAlive, Leases: []uint64{vLease, 1, math.MaxInt64}, TTL: 1000}),
	reqV("revoke", Request{ID: 14, Op: OpRevoke, Lease: vLease, Client: vClient, Seq: 17, AckSeq: 17}),
	reqV("cancel", Request{ID: 15, Op: OpCancel, Path: "/locks/billing/nightly", Client: vClient, Seq: 12}),
	reqV("cancel-multi", Request{ID: 15, Op: OpCancel, Path: "/acct/alice", Paths: []string{"/acct/alice", "/acct/bob"},
		Lease: vLease, Owner: "mover", Client: vClient, Seq: 30}).
		with("withdrawing a multi-lock names its paths, lease and owner: the answer lists the holds it still has"),
	reqV("holds", Request{ID: 2, Op: OpHolds}).with("opens the connection's hold stream, before its keepalives"),
	reqV("lockinfo-stale", Request{ID: 16, Op: OpLockInfo, Path: "/locks/billing", Flags: FlagStale}),
	reqV("listlocks", Request{ID: 17, Op: OpListLocks, Path: "/locks", Flags: FlagPrefix, Limit: 500}),
	reqV("kv-get", Request{ID: 18, Op: OpKVGet, Path: "/config/feature"}),
	reqV("kv-put-ephemeral", Request{ID: 19, Op: OpKVPut, Path: "/services/api/n1", Value: []byte("10.0.0.1:80"),
		Lease: vLease, TTL: 10000, LeaseKey: vKey, Client: vClient, Seq: 18, AckSeq: 18}),
	reqV("kv-put-must-not-exist", Request{ID: 20, Op: OpKVPut, Path: "/config/x", Value: []byte{0, 1, 0xff},
		Flags: FlagHasExpect, Client: vClient, Seq: 19, AckSeq: 19}).
		with("compare-and-set with expected version 0 (must not exist): Version is zero, so it is not sent"),
	reqV("kv-put-cas", Request{ID: 21, Op: OpKVPut, Path: "/config/x", Value: []byte("2"), Flags: FlagHasExpect,
		Version: 1, Client: vClient, Seq: 20, AckSeq: 19}),
	reqV("kv-put-empty-value", Request{ID: 22, Op: OpKVPut, Path: "/config/empty", Value: []byte{},
		Client: vClient, Seq: 21, AckSeq: 21}).
		with("an empty value is sent as an empty bin (Value is present); an absent value is not sent at all"),
	reqV("kv-delete", Request{ID: 23, Op: OpKVDelete, Path: "/config/x", Flags: FlagHasExpect, Version: 2,
		Client: vClient, Seq: 22, AckSeq: 22}),
	reqV("kv-list", Request{ID: 24, Op: OpKVList, Path: "/config", Flags: FlagPrefix | FlagStale, Limit: 100}),
	reqV("campaign", Request{ID: 25, Op: OpCampaign, Path: "/elections/scheduler", Lease: vLease, TTL: 10000,
		Owner: "node-a", Value: []byte("node-a"), Wait: WaitForever, Priority: -3, Client: vClient, Seq: 23,
		AckSeq: 23, LeaseKey: vKey}),
	reqV("proclaim", Request{ID: 26, Op: OpProclaim, Path: "/elections/scheduler", Token: 77, Value: []byte("v2"),
		Client: vClient, Seq: 24, AckSeq: 24}),
	reqV("resign", Request{ID: 27, Op: OpResign, Path: "/elections/scheduler", Token: 77, Client: vClient,
		Seq: 25, AckSeq: 25}),
	reqV("leader", Request{ID: 28, Op: OpLeader, Path: "/elections/scheduler"}),
	reqV("watch", Request{ID: 29, Op: OpWatch, Path: "/locks/billing", Flags: FlagPrefix | FlagPrevKV, Rev: 1234}),
	reqV("watch-hold-notices", Request{ID: 3, Op: OpWatch, Path: "/", Flags: FlagPrefix | FlagHoldNotices, Shard: 4}).
		with("internal: a router follows a shard it has no replica of, over a peer connection, for its hold notices only"),
	reqV("watch-position", Request{ID: 33, Op: OpWatch, Path: "/config", Flags: FlagPrefix,
		Position: []ShardRev{{Shard: 2, Rev: 1041}, {Shard: 3, Rev: 977}, {Shard: 4, Rev: 1240}}}).
		with("a prefix watch resumed after a position: per shard, the last revision seen"),
	reqV("unwatch", Request{ID: 30, Op: OpUnwatch, Stream: 29}),
	reqV("status", Request{ID: 31, Op: OpStatus}),
	reqV("ranges", Request{ID: 32, Op: OpRanges}),
	reqV("session", Request{ID: 33, Op: OpSession, TTL: 10000, Client: vClient, Seq: 26, AckSeq: 26}),
	reqV("acquire-multi", Request{ID: 34, Op: OpAcquireMulti, Path: "/acct/alice", Paths: []string{"/acct/alice", "/acct/bob"},
		Lease: vLease, TTL: 10000, Owner: "transfer-1", LeaseKey: vKey, Flags: FlagRevocable, LockDelay: 2000,
		Client: vClient, Seq: 27, AckSeq: 27}),
	reqV("revokelock", Request{ID: 35, Op: OpRevokeLock, Path: "/locks/report", Token: 0, Grace: 10000,
		Flags: FlagForce, Client: vClient, Seq: 28, AckSeq: 28}),
	reqV("handover", Request{ID: 36, Op: OpHandOver, Path: "/elections/sched", Token: 78, Target: "node-b",
		Client: vClient, Seq: 29, AckSeq: 29}),
	reqV("trace", Request{ID: 37, Op: OpKVGet, Path: "/t",
		Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;congo=t61rcWkgMzE"}),
	reqV("internal-fields", Request{ID: 38, Op: OpSetRanges, Gen: 4, Shard: 3, Term: 9, Identity: "router-set",
		Ranges: []Range{{Start: "", End: "\x80\x00\x00\x00\x00\x00\x00\x00", Shard: 2, Gen: 1},
			{Start: "\x80\x00\x00\x00\x00\x00\x00\x00", End: "", Shard: 3, Gen: 1}},
		Leases: []uint64{5, 6}, Remaining: []int64{1500, -1}, Chunk: 2, ToReplica: 1<<20 | 4}).
		with("fields clients never send (router and node internals), for completeness; Range Start/End are raw route keys"),
	reqV("extremes", Request{ID: math.MaxUint64, Op: OpAcquire, Path: strings.Repeat("/seg", 8), TTL: math.MinInt64,
		Wait: math.MaxInt64, Token: math.MaxUint32 + 1, Limit: math.MaxUint32, Flags: math.MaxUint32,
		Owner: strings.Repeat("o", 40), Value: bytes.Repeat([]byte{0xab}, 300)}).
		with("integer and length encodings at their boundaries: uint64 max, int64 min and max, str8, bin16"),
	{name: "unknown-fields", req: &Request{ID: 5, Op: OpKVGet, Path: "/a"},
		body: append(append([]byte{0x85, 0x01, 0x05, 0x02, 0x0a, 0x03, 0xa2, '/', 'a'},
			0x63, 0xa3, 'n', 'e', 'w'), // field 99: a string nobody knows yet
			0xcc, 0xc8, 0x81, 0xa1, 'k', 0x92, 0x01, 0xc0), // field 200: a map holding an array
		note: "decode only: unknown field numbers (99, 200) are skipped whatever their value"},
	{name: "wide-integers", req: &Request{ID: 5, Op: OpAcquire, TTL: 1000, Wait: -1, Lease: 7},
		body: []byte{0x85,
			0x01, 0xcf, 0, 0, 0, 0, 0, 0, 0, 5, // ID 5 as uint64
			0xcc, 0x02, 0xcd, 0, 2, // key 2 as uint8, Op 2 as uint16
			0x06, 0xd3, 0, 0, 0, 0, 0, 0, 0x03, 0xe8, // TTL 1000 as int64
			0x07, 0xd1, 0xff, 0xff, // Wait -1 as int16
			0x05, 0xd2, 0, 0, 0, 7, // Lease 7 as int32
		},
		note: "decode only: integers in wider encodings than needed, keys included"},
}

var responseVectors = []msgVector{
	respV("empty", Response{}).with("OK with no fields: an empty map"),
	respV("hello", Response{ID: 1, Value: []byte(`{"node":1,"version":"dev"}`)}),
	respV("acquire-granted", Response{ID: 7, Token: 9031, Lease: vLease, Count: 1}),
	respV("acquire-granted-signed", Response{ID: 7, Token: 9031, Lease: vLease, Count: 1, TTL: 9500, Mode: Exclusive,
		Hint:   &Hint{Shard: 4, Gen: 2, Leader: "127.0.0.1:7071"},
		Signed: &SignedGrant{Shard: 4, Expiry: 1_700_000_010_000, Sig: bytes.Repeat([]byte{0x5a}, 64), Mode: Exclusive}}).
		with("a signed grant: TTL is the ms left on its lease, Signed holds [Shard, Expiry, Sig, Mode, Permits]; the Hint names the leader a forwarding node went to"),
	respV("acquire-permit-signed", Response{ID: 7, Token: 9032, Lease: vLease, Count: 1, TTL: 9400, Mode: Shared,
		Signed: &SignedGrant{Shard: 4, Expiry: 1_700_000_010_100, Sig: bytes.Repeat([]byte{0x5b}, 64), Mode: Shared, Permits: 3}}).
		with("a signed semaphore permit: the mode and the permit count are signed"),
	respV("seq-reused", Response{ID: 41, Code: SeqReused, Msg: "seq 7 of client 1 answered another request (session) on this shard"}).
		with("the (Client, Seq) named another request: nothing applied"),
	respV("acquire-single-lease", Response{ID: 8, Token: 12, Lease: 1<<63 | 42, Count: 1}).
		with("a server-made single-lock lease id has the top bit set"),
	respV("conflict", Response{ID: 8, Code: Conflict, Msg: "/locks/reports is held exclusively"}),
	respV("not-leader", Response{ID: 9, Code: NotLeader, Msg: "not leader", Hint: &Hint{Shard: 3, Gen: 5, Leader: "127.0.0.1:7072"}}),
	respV("wrong-shard-no-leader", Response{ID: 9, Code: WrongShard, Hint: &Hint{Shard: 6, Gen: 7}}).
		with("a hint without a known leader has no \"l\" key"),
	respV("too-many-retry-hint", Response{ID: 10, Code: TooMany, Msg: "rate", TTL: 250}),
	respV("queued", Response{ID: 7, Code: Queued}).with("interim notice: keep waiting for the final answer"),
	respV("release", Response{ID: 10, Count: 0}),
	respV("release-reentrant", Response{ID: 10, Count: 2}),
	respV("renew", Response{ID: 11, TTL: 600000}),
	respV("keepalive-gone-denied", Response{ID: 13, Leases: []uint64{1}, Denied: []uint64{math.MaxInt64}}),
	respV("keepalive-unavailable-gone", Response{ID: 13, Code: Unavailable, Msg: "shard 3: no leader", Leases: []uint64{vLease}}).
		with("a lease listed as gone is lost even when the code is an error"),
	respV("cancel-granted", Response{ID: 15, Token: 9032}),
	respV("cancel-multi-held", Response{ID: 15, Holders: []Holder{
		{Owner: "mover", Lease: vLease, Token: 400, Count: 1, Path: "/acct/bob"}}}).
		with("the withdrawn multi-lock still holds /acct/bob: give it back by that token"),
	respV("keepalive-notices", Response{ID: 13, Events: []Event{
		{Rev: 501, Kind: EvReleased, Cause: CauseForced, Path: "/locks/report", Token: 88, Lease: vLease, Owner: "o",
			Shard: 2, Time: 1_700_000_004_000}}}).
		with("the recent holds of the requested leases the service ended without the holder"),
	respV("holds-started", Response{ID: 2, Stream: 2}),
	respV("holds-push", Response{Stream: 2, Events: []Event{
		{Rev: 502, Kind: EvReleased, Cause: CauseResigned, Path: "/elections/s2", Token: 90, Lease: vLease, Owner: "a",
			Client: 0x1234, Seq: 7, Shard: 2, Time: 1_700_000_005_000},
		{Rev: 503, Kind: EvLeaseEnd, Cause: CauseExpired, Lease: vLease, Shard: 2, Time: 1_700_000_006_000}}}).
		with("a hold another client ended (its Client and Seq, or 0 where the caller may not see them), and the lease's end"),
	respV("lockinfo", Response{ID: 16, Rev: 88,
		Holders: []Holder{{Owner: "a", Lease: vLease, Mode: Shared, Token: 7, Count: 2, Path: "/locks/billing", TTL: 9500},
			{Owner: "", Lease: 1<<63 | 3, Mode: Shared, Token: 8, Count: 1, Path: "/locks/billing"}},
		Waiters: []Waiter{{Owner: "w", Lease: 11, Mode: Exclusive, Client: vClient, Seq: 40, Path: "/locks/billing"}},
		Permits: 3, DelayUntil: 1_700_000_000_000, RevokeAt: 1_700_000_001_000}),
	respV("lockinfo-delay-only", Response{ID: 16, Rev: 89, DelayUntil: 1_700_000_002_000}),
	respV("kv-get", Response{ID: 18, Path: "/config/feature", Value: []byte("on"), Version: 3, Lease: vLease, Rev: 120,
		KVs: []KV{{Key: "/config/feature", Value: []byte("on"), Version: 3, Lease: vLease, CreateRev: 100, ModRev: 120}}}),
	respV("kv-get-empty-value", Response{ID: 18, Path: "/config/empty", Value: []byte{}, Version: 1, Rev: 121,
		KVs: []KV{{Key: "/config/empty", Value: []byte{}, Version: 1, CreateRev: 121, ModRev: 121}}}).
		with("an empty value is an empty bin, present; in records a missing value is nil"),
	respV("kv-put", Response{ID: 19, Version: 1, Rev: 122}),
	respV("kv-mismatch", Response{ID: 21, Code: VersionMismatch, Msg: "version 2, expected 1"}),
	respV("kv-list", Response{ID: 24, Rev: 130, Count: 2, KVs: []KV{
		{Key: "/config/a", Value: []byte("1"), Version: 1, CreateRev: 3, ModRev: 3},
		{Key: "/config/b", Value: nil, Version: 9, Lease: vLease, CreateRev: 4, ModRev: 20}}}),
	respV("leader", Response{ID: 28, Value: []byte("node-a"), Token: 77, Lease: vLease, Owner: "node-a", Rev: 131}),
	respV("watch-started", Response{ID: 29, Stream: 29, Rev: 1233}),
	respV("watch-push", Response{Stream: 29, Events: []Event{
		{Rev: 1234, Kind: EvAcquired, Cause: CauseDirect, Path: "/locks/billing/x", Token: 9031, Lease: vLease,
			Owner: "3f2a9c1b", Client: vClient, Seq: 12, Shard: 4, Time: 1_700_000_000_123},
		{Rev: 1235, Kind: EvReleased, Cause: CauseReleased, Path: "/locks/billing/x", Token: 9031, Lease: vLease,
			Owner: "3f2a9c1b", Shard: 4, Time: 1_700_000_000_456},
		{Rev: 1236, Kind: EvReleased, Cause: CauseExpired, Path: "/locks/billing/y", Mode: Shared, Token: 9033,
			Lease: 1<<63 | 9, Shard: 4, Time: 1_700_000_001_000},
		{Rev: 1237, Kind: EvKVPut, Cause: CauseUser, Path: "/locks/billing/cfg", Value: []byte{}, Version: 1, Shard: 4,
			Time: 1_700_000_002_000},
		{Rev: 1238, Kind: EvRevokeRequested, Cause: CauseWaiter, Path: "/locks/billing/x", Token: 9040, Lease: vLease,
			Owner: "o", TTL: 10000, Shard: 4, Time: 1_700_000_003_000},
		{Rev: 1239, Kind: EvDelayStarted, Cause: CauseForced, Path: "/locks/billing/x", TTL: 5000, Shard: 4,
			Time: 1_700_000_013_000},
		{Rev: 1240, Kind: EvLeader, Cause: CauseHandover, Path: "/locks/billing/e", Value: []byte("node-b"),
			Token: 9050, Owner: "node-b", Shard: 4, Time: -1},
	}}).with("pushes carry ID 0 and the watch's Stream"),
	respV("watch-end-compacted", Response{Stream: 29, Code: Compacted, Msg: "oldest retained revision is 2000"}).
		with("a push with a non-OK code ends the stream"),
	respV("watch-prefix-started", Response{ID: 33, Stream: 33,
		Position: []ShardRev{{Shard: 2, Rev: 1041}, {Shard: 3, Rev: 977}, {Shard: 4, Rev: 1240}}}).
		with("a prefix watch's first answer: per shard, the revision the stream starts after"),
	respV("watch-compacted-shard", Response{ID: 33, Code: Compacted, Msg: "shard 3: revision 978 is no longer retained by this node (oldest is 2000)",
		Position: []ShardRev{{Shard: 3, Rev: 2000}}}).
		with("Compacted names the shard and its oldest retained revision"),
	respV("ranges", Response{ID: 32, Ranges: []Range{{Start: "", End: "\x40\x00\x00\x00\x00\x00\x00\x00", Shard: 2, Gen: 1},
		{Start: "\x40\x00\x00\x00\x00\x00\x00\x00", End: "", Shard: 3, Gen: 2}},
		Table: &RouteTable{Gen: 2, Depth: 2,
			Ranges: []Range{{Start: "", End: "\x40\x00\x00\x00\x00\x00\x00\x00", Shard: 2, Gen: 1},
				{Start: "\x40\x00\x00\x00\x00\x00\x00\x00", End: "", Shard: 3, Gen: 2}},
			Leaders: []ShardLeader{{Shard: 2, Addr: "127.0.0.1:7070"}, {Shard: 3, Addr: ""}}}}).
		with("Range Start/End are raw 8-byte route keys in msgpack str; End \"\" is unbounded"),
	respV("acquire-multi", Response{ID: 34, Count: 2, Holders: []Holder{
		{Owner: "transfer-1", Lease: vLease, Token: 501, Count: 1, Path: "/acct/alice"},
		{Owner: "transfer-1", Lease: vLease, Token: 88, Count: 1, Path: "/acct/bob"}}}),
	respV("revokelock", Response{ID: 35, Count: 1, TTL: 10000}),
	respV("handover", Response{ID: 36, Token: 79, Lease: vLease, Owner: "node-b"}),
	respV("grants-internal", Response{ID: 40, Grants: []Grant{{Client: vClient, Seq: 3, Path: "/a", Token: 9, Lease: 5, Mode: Shared}}}).
		with("internal: never sent to clients"),
	respV("too-large-unmatched", Response{Code: TooLarge, Msg: "frame of 2097152 bytes over the limit"}).
		with("ID 0: the server could not read the request it answers"),
	respV("extremes", Response{ID: math.MaxUint64, Code: Code(math.MaxUint16), Token: math.MaxUint64, TTL: math.MinInt64,
		Count: math.MaxUint32, Msg: strings.Repeat("m", 256), Value: bytes.Repeat([]byte{1}, 300)}).
		with("boundaries: uint64 and uint16 max, int64 min, str16, bin16"),
	{name: "longer-records", resp: &Response{ID: 3, Holders: []Holder{{Owner: "o", Lease: 1, Token: 2, Count: 1, Path: "/p", TTL: 5}}},
		body: []byte{0x82, 0x01, 0x03, 0x10, 0x91,
			0x99, 0xa1, 'o', 0x01, 0x00, 0x02, 0x01, 0xa2, '/', 'p', 0x05, // the seven known fields
			0xa5, 'l', 'a', 't', 'e', 'r', 0x92, 0x01, 0x02}, // two more appended by a newer server
		note: "decode only: a record array longer than the decoder knows; the extra elements are ignored"},
	{name: "signed-grant-three-elements", resp: &Response{ID: 6, Token: 9,
		Signed: &SignedGrant{Shard: 2, Expiry: 1000, Sig: []byte{0xaa}}},
		body: []byte{0x83, 0x01, 0x06, 0x04, 0x09, 0x18, 0x93, 0x02, 0xcd, 0x03, 0xe8, 0xc4, 0x01, 0xaa},
		note: "decode only: a signed grant without Mode and Permits (an older server) reads as mode 0, permits 0"},
	{name: "nil-lists-and-wide", resp: &Response{ID: 4, Token: 1, TTL: -1},
		body: []byte{0x85, 0x01, 0x04, 0x10, 0xc0, 0x13, 0xc0, 0x04, 0xce, 0, 0, 0, 1, 0x06, 0xd0, 0xff},
		note: "decode only: nil for a list is an empty list; wide integers"},
}

// derivedVectors are the values a client computes itself.
type derivedVectors struct {
	LeaseIDs   []leaseIDVector   `json:"lease_ids"`
	RouteKeys  []routeKeyVector  `json:"route_keys"`
	Namespaces []namespaceVector `json:"namespaces"`
	Signed     []signedVector    `json:"signed_messages"`
	Owned      []ownedVector     `json:"owned_clients"`
}

type leaseIDVector struct {
	Key uint64 `json:"key"`
	ID  uint64 `json:"id"`
}
type routeKeyVector struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key_hex"`
}
type namespaceVector struct {
	Path      string `json:"path"`
	Depth     int    `json:"depth"`
	Namespace string `json:"namespace"`
	SpansAll  bool   `json:"spans_all"`
}
type signedVector struct {
	Path    string `json:"path"`
	Token   uint64 `json:"token"`
	Shard   uint64 `json:"shard"`
	Expiry  int64  `json:"expiry"`
	Mode    Mode   `json:"mode"`
	Permits uint32 `json:"permits"`
	Message string `json:"message_hex"`
}
type ownedVector struct {
	Identity string `json:"identity"`
	Client   uint64 `json:"client"`
	Owned    uint64 `json:"owned"`
}

func makeDerived() derivedVectors {
	var d derivedVectors
	for _, k := range []uint64{1, 2, vKey, math.MaxUint64, 1 << 63, 12345} {
		d.LeaseIDs = append(d.LeaseIDs, leaseIDVector{Key: k, ID: LeaseID(k)})
	}
	for _, ns := range []string{"/", "/locks", "/locks/billing", "/locks/billing2", "/elections/scheduler", "/é/ü"} {
		d.RouteKeys = append(d.RouteKeys, routeKeyVector{Namespace: ns, Key: hex.EncodeToString([]byte(RouteKey(ns)))})
	}
	for _, p := range []struct {
		path  string
		depth int
	}{{"/locks/billing/job-7", 2}, {"/locks/billing", 2}, {"/locks", 2}, {"/", 2}, {"/a/b/c/d", 3}, {"/a/b", 1}} {
		ns := Namespace(p.path, p.depth)
		d.Namespaces = append(d.Namespaces, namespaceVector{Path: p.path, Depth: p.depth, Namespace: ns,
			SpansAll: PathDepth(p.path) < p.depth})
	}
	for _, s := range []signedVector{
		{Path: "/locks/inventory/sku-42", Token: 9031, Shard: 4, Expiry: 1_700_000_010_000, Mode: Exclusive},
		{Path: "/locks/pool/db", Token: 77, Shard: 2, Expiry: 1_700_000_020_000, Mode: Shared, Permits: 5},
	} {
		s.Message = hex.EncodeToString(SignedMessage(s.Path, s.Token, s.Shard, s.Expiry, s.Mode, s.Permits))
		d.Signed = append(d.Signed, s)
	}
	for _, o := range []ownedVector{{Identity: "billing", Client: vClient}, {Identity: "billing2", Client: vClient},
		{Identity: "spiffe://example.org/ci", Client: 1}} {
		o.Owned = OwnedClient(o.Identity, o.Client)
		d.Owned = append(d.Owned, o)
	}
	return d
}

// vectorFile is the JSON form of one file of message vectors.
type vectorFile struct {
	Comment string        `json:"comment"`
	Vectors []vectorEntry `json:"vectors"`
}

type vectorEntry struct {
	Name       string         `json:"name"`
	Note       string         `json:"note,omitempty"`
	DecodeOnly bool           `json:"decode_only,omitempty"`
	Frame      string         `json:"frame"`
	Fields     map[string]any `json:"fields"`
}

func (v msgVector) msg() any {
	if v.req != nil {
		return v.req
	}
	return v.resp
}

func encodeCanonical(m any) []byte {
	switch m := m.(type) {
	case *Request:
		return AppendRequest(nil, m)
	case *Response:
		return AppendResponse(nil, m)
	}
	panic("not a message")
}

func makeFile(comment string, vs []msgVector) vectorFile {
	f := vectorFile{Comment: comment}
	for _, v := range vs {
		body := v.body
		if body == nil {
			body = encodeCanonical(v.msg())
		}
		frame := binary4(len(body))
		f.Vectors = append(f.Vectors, vectorEntry{Name: v.name, Note: v.note, DecodeOnly: v.body != nil,
			Frame: hex.EncodeToString(append(frame, body...)), Fields: fieldsJSON(reflect.ValueOf(v.msg()).Elem(), false)})
	}
	return f
}

func binary4(n int) []byte { return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)} }

// fieldsJSON is the language-neutral form of a message (record = false:
// only non-zero fields, as on the wire) or of a nested record (all fields).
func fieldsJSON(v reflect.Value, record bool) map[string]any {
	out := map[string]any{}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		if !record && fv.IsZero() {
			continue
		}
		out[f.Name] = valueJSON(fv, t == reflect.TypeOf(Range{}))
	}
	return out
}

func valueJSON(v reflect.Value, rawString bool) any {
	switch v.Kind() {
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint()
	case reflect.Int, reflect.Int64:
		return v.Int()
	case reflect.String:
		if rawString {
			return hex.EncodeToString([]byte(v.String()))
		}
		return v.String()
	case reflect.Pointer:
		return fieldsJSON(v.Elem(), true)
	case reflect.Struct:
		return fieldsJSON(v, true)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.IsNil() {
				return nil
			}
			return hex.EncodeToString(v.Bytes())
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = valueJSON(v.Index(i), false)
		}
		return out
	}
	panic(fmt.Sprintf("vectors: no JSON form for %s", v.Type()))
}

// fromJSON fills v (a message or record) from its JSON form.
func fromJSON(t *testing.T, m map[string]any, v reflect.Value) {
	t.Helper()
	for name, raw := range m {
		f := v.FieldByName(name)
		if !f.IsValid() {
			t.Fatalf("vectors: %s has no field %s", v.Type(), name)
		}
		setJSON(t, f, raw, v.Type() == reflect.TypeOf(Range{}))
	}
}

func setJSON(t *testing.T, f reflect.Value, raw any, rawString bool) {
	t.Helper()
	switch f.Kind() {
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := raw.(json.Number).Int64()
		u := uint64(n)
		if err != nil {
			var perr error
			_, perr = fmt.Sscan(raw.(json.Number).String(), &u)
			if perr != nil {
				t.Fatal(perr)
			}
		}
		f.SetUint(u)
	case reflect.Int, reflect.Int64:
		n, err := raw.(json.Number).Int64()
		if err != nil {
			t.Fatal(err)
		}
		f.SetInt(n)
	case reflect.String:
		s := raw.(string)
		if rawString {
			b, err := hex.DecodeString(s)
			if err != nil {
				t.Fatal(err)
			}
			s = string(b)
		}
		f.SetString(s)
	case reflect.Pointer:
		p := reflect.New(f.Type().Elem())
		fromJSON(t, raw.(map[string]any), p.Elem())
		f.Set(p)
	case reflect.Struct:
		fromJSON(t, raw.(map[string]any), f)
	case reflect.Slice:
		if f.Type().Elem().Kind() == reflect.Uint8 {
			if raw == nil {
				f.SetBytes(nil)
				return
			}
			b, err := hex.DecodeString(raw.(string))
			if err != nil {
				t.Fatal(err)
			}
			f.SetBytes(b)
			return
		}
		items := raw.([]any)
		s := reflect.MakeSlice(f.Type(), len(items), len(items))
		for i, it := range items {
			setJSON(t, s.Index(i), it, false)
		}
		f.Set(s)
	default:
		t.Fatalf("vectors: cannot set %s", f.Type())
	}
}

func writeJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(vectorDir, name)
	if *updateVectors {
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./wire -run TestVectors -update)", err)
	}
	if !bytes.Equal(bytes.TrimSpace(old), b) {
		t.Fatalf("%s differs from the vector tables in vectors_test.go: run go test ./wire -run TestVectors -update", path)
	}
}

func readVectorFile(t *testing.T, name string) vectorFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, name))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var f vectorFile
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestVectors(t *testing.T) {
	writeJSON(t, "requests.json", makeFile("Requests, client to server: docs/protocol.md §3.1 and §4.", requestVectors))
	writeJSON(t, "responses.json", makeFile("Responses and pushes, server to client: docs/protocol.md §3.2, §3.3 and §4.", responseVectors))
	writeJSON(t, "derived.json", makeDerived())

	// Every vector in the files (what other languages read) against both codecs.
	for _, file := range []string{"requests.json", "responses.json"} {
		isReq := file == "requests.json"
		for _, v := range readVectorFile(t, file).Vectors {
			t.Run(strings.TrimSuffix(file, ".json")+"/"+v.Name, func(t *testing.T) {
				frame, err := hex.DecodeString(v.Frame)
				if err != nil {
					t.Fatal(err)
				}
				body, err := ReadFrame(bufio.NewReader(bytes.NewReader(frame)), DefaultMaxFrame, nil)
				if err != nil {
					t.Fatalf("ReadFrame: %v", err)
				}
				if isReq {
					checkVector(t, v, body, requestCodec)
				} else {
					checkVector(t, v, body, responseCodec)
				}
			})
		}
	}

	d := makeDerived()
	var fromFile derivedVectors
	b, err := os.ReadFile(filepath.Join(vectorDir, "derived.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &fromFile); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d, fromFile) {
		t.Fatalf("derived.json disagrees with LeaseID/RouteKey/Namespace/SignedMessage/OwnedClient")
	}
}

// vectorCodec is one message type's encoders and decoders, which must all
// agree with the vectors.
type vectorCodec[M any] struct {
	appendTo func([]byte, *M) []byte
	decode   func([]byte, *M) error
	read     func(*Reader, *M) bool
	// readsCanonical: whether the hand-written Reader must take m's canonical encoding.
	readsCanonical func(m *M) bool
}

var (
	requestCodec = vectorCodec[Request]{AppendRequest, DecodeRequest, (*Reader).Request,
		func(*Request) bool { return true }}
	responseCodec = vectorCodec[Response]{AppendResponse, DecodeResponse, (*Reader).Response,
		(*Response).hasHandWrittenForm}
)

func checkVector[M any](t *testing.T, v vectorEntry, body []byte, c vectorCodec[M]) {
	var want M
	fromJSON(t, v.Fields, reflect.ValueOf(&want).Elem())
	if !v.DecodeOnly {
		if got := c.appendTo(nil, &want); !bytes.Equal(got, body) {
			t.Fatalf("hand-written encoder:\n got %x\nwant %x", got, body)
		}
		if got := libraryEncode(t, any(&want).(msgpack.CustomEncoder)); !bytes.Equal(got, body) {
			t.Fatalf("library encoder:\n got %x\nwant %x", got, body)
		}
	}
	var lib, fast, rd M
	if err := decode(body, any(&lib).(msgpack.CustomDecoder)); err != nil {
		t.Fatalf("library decoder: %v", err)
	}
	if !reflect.DeepEqual(lib, want) {
		t.Fatalf("library decoder:\n got %+v\nwant %+v", lib, want)
	}
	if err := c.decode(body, &fast); err != nil || !reflect.DeepEqual(fast, want) {
		t.Fatalf("fast decoder: %v\n got %+v\nwant %+v", err, fast, want)
	}
	r := NewReader(body, false)
	took := c.read(&r, &rd) && r.Len() == 0
	if took && !reflect.DeepEqual(rd, want) {
		t.Fatalf("hand-written Reader:\n got %+v\nwant %+v", rd, want)
	}
	if !took && !v.DecodeOnly && c.readsCanonical(&want) {
		t.Fatalf("the hand-written Reader refused the canonical encoding")
	}
}
