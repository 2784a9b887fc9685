package router

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/wire"
)

// permTestPolicy: "holder" has every permission on /p; "root" has admin on /; "outsider" has every
// permission, but on /q only; "viewer" has read on /.
const permTestPolicy = `
tokens: {h: holder, o: outsider, r: root, v: viewer}
identities: {holder: [p], outsider: [q], root: [r], viewer: [v]}
roles:
  p: [{prefix: /p, perms: [all]}]
  q: [{prefix: /q, perms: [all]}]
  r: [{prefix: /, perms: [admin]}]
  v: [{prefix: /, perms: [read]}]
`

// How every client op is guarded. A new op must be added to one of these
// sets (TestEveryOpIsGuarded fails otherwise), with a refusal case if it
// needs a permission.
var (
	// pathOps need a permission on their path: refused to an identity
	// without it, before anything is routed.
	pathOps = map[wire.Op]wire.Request{
		wire.OpAcquire:   {Op: wire.OpAcquire, Path: "/p/x", TTL: 5000},
		wire.OpRelease:   {Op: wire.OpRelease, Path: "/p/x", Token: 9},
		wire.OpRenew:     {Op: wire.OpRenew, Path: "/p/x", Token: 9, TTL: 5000},
		wire.OpCancel:    {Op: wire.OpCancel, Path: "/p/x", Client: 1, Seq: 1},
		wire.OpLockInfo:  {Op: wire.OpLockInfo, Path: "/p/x"},
		wire.OpListLocks: {Op: wire.OpListLocks, Path: "/p"},
		wire.OpKVGet:     {Op: wire.OpKVGet, Path: "/p/x"},
		wire.OpKVPut:     {Op: wire.OpKVPut, Path: "/p/x", Value: []byte("v")},
		wire.OpKVDelete:  {Op: wire.OpKVDelete, Path: "/p/x"},
		wire.OpKVList:    {Op: wire.OpKVList, Path: "/p"},
		wire.OpCampaign:  {Op: wire.OpCampaign, Path: "/p/e", TTL: 5000},
		wire.OpProclaim:  {Op: wire.OpProclaim, Path: "/p/e", Token: 9, Value: []byte("v")},
		wire.OpResign:    {Op: wire.OpResign, Path: "/p/e", Token: 9},
		wire.OpLeader:    {Op: wire.OpLeader, Path: "/p/e"},
		wire.OpWatch:     {Op: wire.OpWatch, Path: "/p", Flags: wire.FlagPrefix},
		// Every path of a multi-lock needs the permission, so one outside
		// the caller's prefix refuses the whole request.
		wire.OpAcquireMulti: {Op: wire.OpAcquireMulti, Paths: []string{"/p/x", "/p/y"}, TTL: 5000},
		wire.OpRevokeLock:   {Op: wire.OpRevokeLock, Path: "/p/x", Grace: 100},
		wire.OpHandOver:     {Op: wire.OpHandOver, Path: "/p/e", Token: 9, Target: "next"},
	}
	// leaseOps name a lease: any identity may send them, and the state
	// machine (and the lessor) refuse them on a lease another identity
	// created (statemachine/owners_test.go, node TestLeasesBoundToIdentity).
	leaseOps = map[wire.Op]bool{wire.OpKeepAlive: true, wire.OpRevoke: true, wire.OpSession: true}
	// openOps are allowed to every authenticated identity: the handshake,
	// cluster metadata, ending one's own watch (Cancel without a path is
	// one of the connection's own waits; with a path it is in pathOps), and
	// the hold stream, which carries only the notices of leases this
	// connection's own keepalives named and every shard acknowledged.
	openOps = map[wire.Op]bool{wire.OpHello: true, wire.OpStatus: true, wire.OpRanges: true, wire.OpUnwatch: true,
		wire.OpHolds: true}
	// rootReadOps show the cluster's layout and load (range.list, shards):
	// read on "/" is needed, whatever path the request names.
	rootReadOps = map[wire.Op]bool{wire.OpShards: true, wire.OpRangeList: true, wire.OpShardLog: true}
	// rootAdminOps change the cluster's machines: admin on "/" is needed,
	// whatever path the request names (so admin on /p is not enough).
	rootAdminOps = map[wire.Op]bool{wire.OpNodeJoin: true, wire.OpNodeAdmin: true, wire.OpReplicaMove: true,
		wire.OpShardTransfer: true, wire.OpRangeSplit: true, wire.OpRangeMerge: true, wire.OpRangeMove: true,
		wire.OpShardAdd: true, wire.OpShardRetire: true}
)

// TestEveryOpIsGuarded: every client op is refused to an identity without
// the permission it needs and allowed with it, or is deliberately open or
// lease-bound. Admin actions outside the wire protocol go through
// AuthorizeAdmin (TestAuthorizeAdmin), which audits every attempt.
func TestEveryOpIsGuarded(t *testing.T) {
	pol, err := auth.Parse([]byte(permTestPolicy))
	if err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, Config{Security: Security{Policy: pol}})
	connAs := func(identity string) *conn {
		c := &conn{s: s}
		c.sec.identity = identity
		return c
	}
	holder, outsider := connAs("holder"), connAs("outsider")
	for op := wire.Op(1); op < 255; op++ {
		if strings.HasPrefix(op.String(), "op(") || op.Internal() {
			continue // not an op, or refused to clients as internal (TestHostileInput)
		}
		t.Run(op.String(), func(t *testing.T) {
			req, guarded := pathOps[op]
			switch {
			case guarded:
				if opPerm(&req) == 0 {
					t.Fatalf("%v needs no permission: move it to openOps or give it one", op)
				}
				err := outsider.authorize(&req)
				if we, ok := err.(*wire.Error); !ok || we.Code != wire.Unauthorized || !strings.Contains(we.Detail, "may not") {
					t.Fatalf("outsider: %v, want Unauthorized", err)
				}
				if err := holder.authorize(&req); err != nil {
					t.Fatalf("holder: %v", err)
				}
			case rootAdminOps[op]:
				req := wire.Request{Op: op, Path: "/p/x", Value: []byte("{}")}
				if opPerm(&req) != auth.Admin {
					t.Fatalf("%v must need admin", op)
				}
				if err := holder.authorize(&req); err == nil {
					t.Fatalf("%v allowed with admin on /p only: it needs admin on /", op)
				}
				root := connAs("root")
				if err := root.authorize(&req); err != nil {
					t.Fatalf("%v refused to admin on /: %v", op, err)
				}
			case rootReadOps[op]:
				req := wire.Request{Op: op, Path: "/p/x"}
				if err := holder.authorize(&req); err == nil {
					t.Fatalf("%v allowed with every permission on /p only: it needs read on /", op)
				}
				if err := connAs("viewer").authorize(&req); err != nil {
					t.Fatalf("%v refused to read on /: %v", op, err)
				}
			case leaseOps[op] || openOps[op]:
				req := wire.Request{Op: op, Path: "/p/x", Lease: 5}
				if perm := opPerm(&req); perm != 0 {
					t.Fatalf("%v is listed as open but needs %v", op, perm)
				}
			default:
				t.Fatalf("%v has no refusal case: add it to pathOps, leaseOps or openOps", op)
			}
		})
	}
}

// TestLeaseIdentityIsStamped: the router, not the client, says who sends a
// lease-bearing request; with auth off it says nobody.
func TestLeaseIdentityIsStamped(t *testing.T) {
	pol, err := auth.Parse([]byte(permTestPolicy))
	if err != nil {
		t.Fatal(err)
	}
	on := &conn{s: newTestServer(t, Config{Security: Security{Policy: pol}})}
	on.sec.identity = "holder"
	off := &conn{s: newTestServer(t, Config{})}
	off.sec.identity = "cert-cn"
	for _, tc := range []struct {
		name string
		c    *conn
		req  wire.Request
		want string
	}{
		{"forged identity replaced", on, wire.Request{Op: wire.OpRevoke, Lease: 5, Identity: "outsider"}, "holder"},
		{"keepalive of several leases", on, wire.Request{Op: wire.OpKeepAlive, Leases: []uint64{5, 6}}, "holder"},
		{"no lease, no identity", on, wire.Request{Op: wire.OpKVGet, Path: "/p/x", Identity: "outsider"}, ""},
		{"auth off", off, wire.Request{Op: wire.OpRevoke, Lease: 5, Identity: "outsider"}, ""},
	} {
		if got := tc.c.leaseIdentity(&tc.req); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestAuthorizeAdmin: admin actions (force release, range moves, node
// changes) need the admin permission on their path, and every attempt,
// allowed or not, is written to the audit log; with auth off they are
// allowed and still audited.
func TestAuthorizeAdmin(t *testing.T) {
	pol, err := auth.Parse([]byte(permTestPolicy))
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	audit := slog.New(slog.NewTextHandler(&log, nil))
	s := newTestServer(t, Config{Security: Security{Policy: pol, Audit: audit}})
	if err := s.AuthorizeAdmin("holder", "force-release", "/p/x"); err != nil {
		t.Fatalf("holder (admin on /p): %v", err)
	}
	err = s.AuthorizeAdmin("outsider", "range-move", "/p")
	if we, ok := err.(*wire.Error); !ok || we.Code != wire.Unauthorized {
		t.Fatalf("outsider: %v, want Unauthorized", err)
	}
	open := newTestServer(t, Config{Security: Security{Audit: audit}})
	if err := open.AuthorizeAdmin("", "node-remove", "/"); err != nil {
		t.Fatalf("auth off: %v", err)
	}
	for _, want := range []string{
		"identity=holder op=force-release path=/p/x allowed=true",
		"identity=outsider op=range-move path=/p allowed=false",
		`identity="" op=node-remove path=/ allowed=true`,
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("audit log lacks %q:\n%s", want, log.String())
		}
	}
}
