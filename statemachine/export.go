package statemachine

import (
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/wardenlock/warden/wire"
)

// ExportQuery (Lookup) returns *RangeExport: the state of a frozen range,
// what the destination of a move installs. It refuses a range that is not
// frozen, since its state could change after the copy.
type ExportQuery struct {
	Start, End string
}

// RangeExport is a range's state in a logical form, independent of the
// trie's layout. A move sends it in chunks (Chunks), each a RangeExport of
// its own, installed by OpInstallRange.
type RangeExport struct {
	Fence   uint64          `msgpack:"f"` // the source's fence (or floor): the destination's floor is raised to it
	Rev     uint64          `msgpack:"r"` // the source's revision: the destination's is raised to it (FIFO arrival order)
	Leases  []ExLease       `msgpack:"l,omitempty"`
	Nodes   []ExNode        `msgpack:"n,omitempty"`
	Clients []ExClient      `msgpack:"c,omitempty"`
	size    int             // estimated encoded size (chunking)
	leased  map[uint64]bool // leases already in this chunk
}

// ExLease is a session lease some entry of the range belongs to.
type ExLease struct {
	_msgpack struct{} `msgpack:",as_array"`
	ID       uint64
	TTL      int64
	Owner    string // the identity the lease is bound to (auth on), "" for none
}

// ExNode is one path with state.
type ExNode struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Path      string
	Holders   []ExHolder
	Waiters   []ExWaiter
	KV        *ExKV
	HasLeader bool
	Leader    []byte
	Permits   uint32 // a semaphore's permit count while permits are out
	DelayEnd  int64  // stamped ms the path's lock-delay ends (0: none)
}

// ExHolder is one grant.
type ExHolder struct {
	_msgpack struct{} `msgpack:",as_array"`
	Owner    string
	Lease    uint64 // session lease id, or the single-lock lease id
	Token    uint64
	Count    uint32
	Mode     wire.Mode
	Campaign bool
	Single   bool
	TTL      int64 // single-lock lease TTL

	// Options (extras.go): lock-delay, revocability, a pending revocation.
	Delay     int64
	Revocable bool
	RevokeAt  int64

	Identity string // single-lock lease: the identity it is bound to (auth on), "" for none
}

// ExWaiter is one queued request, with its exactly-once record.
type ExWaiter struct {
	_msgpack struct{} `msgpack:",as_array"`
	Owner    string
	Lease    uint64
	TTL      int64
	Client   uint64
	Seq      uint64
	Arrival  uint64
	Value    []byte
	Mode     wire.Mode
	Campaign bool
	Op       wire.Op // of the record; 0 = no record
	Floor    uint64  // the client's floor

	// Options (extras.go) that pass to the holder when it is granted.
	HasExtra  bool
	Permits   uint32
	Delay     int64
	Revocable bool
	Priority  int64

	Identity string // a queued single-lock acquire: the identity its lease will be bound to
}

// ExKV is one key.
type ExKV struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Value     []byte
	Version   uint64
	CreateRev uint64
	ModRev    uint64
	Lease     uint64
}

// ExClient carries a client's resolved exactly-once records. Records do not
// say which path they were for, so all of them travel: a retry that reaches
// the destination then finds its first answer there.
type ExClient struct {
	_msgpack struct{} `msgpack:",as_array"`
	ID       uint64
	Floor    uint64
	Records  []ExRecord
}

// ExRecord is one resolved outcome.
type ExRecord struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Seq       uint64
	Op        wire.Op
	Code      wire.Code
	Mode      wire.Mode
	Count     uint32
	Msg       string
	Token     uint64
	Lease     uint64
	Version   uint64
	Rev       uint64
	TTL       int64
	Lingering bool
	Sum       uint64 // requestSum of the request answered (0 from a source that did not record it)
}

func (s *StateMachine) exportRange(q ExportQuery) (*RangeExport, error) {
	frozen := false
	for _, f := range s.frozen {
		frozen = frozen || f.start == q.Start && f.end == q.End
	}
	if !frozen {
		return nil, wire.Errorf(wire.InvalidArgument, "range [%x, %x) is not frozen on shard %d", q.Start, q.End, s.cfg.ShardID)
	}
	x := &RangeExport{Fence: max(s.fence, s.floor), Rev: s.rev}
	seen := map[uint64]bool{}
	addLease := func(id uint64) {
		if l := s.leases[id]; id != 0 && l != nil && !seen[id] {
			seen[id] = true
			x.Leases = append(x.Leases, ExLease{ID: id, TTL: l.ttl, Owner: l.owner})
		}
	}
	for _, ns := range s.rangeNodes(q.Start, q.End) {
		ns.Walk(nil, func(n *lockNode) bool {
			if !slotInUse(n) {
				return true
			}
			en := ExNode{Path: n.Path()}
			en.Permits, en.DelayEnd = s.sems[en.Path], s.delays[en.Path]
			forHolders(n, func(h *holder) {
				eh := ExHolder{Owner: h.owner, Lease: h.leaseID(), Token: h.token, Count: h.count, Mode: h.mode,
					Campaign: h.campaign, Single: h.single}
				if h.single {
					eh.TTL = h.singleTTL()
				} else {
					addLease(h.lw)
				}
				if hx := s.holdX[h.token]; hx != nil {
					eh.Delay, eh.Revocable, eh.RevokeAt = hx.delay, hx.revocable, hx.revokeAt
				}
				if h.single {
					eh.Identity = s.singleOwn[h.token]
				}
				en.Holders = append(en.Holders, eh)
			})
			if e := n.Val.ext; e != nil {
				for w := e.head; w != nil; w = w.next {
					addLease(w.lease)
					ew := ExWaiter{Owner: w.owner, Lease: w.lease, TTL: w.ttl, Client: w.client, Seq: w.seq,
						Arrival: w.arrival, Value: w.value, Mode: w.mode, Campaign: w.campaign}
					if c := s.clients[w.client]; c != nil {
						if rec := c.record(w.seq); rec != nil && rec.w == w {
							ew.Op, ew.Floor = rec.op, c.floor
						}
					}
					ew.Identity = s.waitOwn[w.arrival]
					if wx := s.waitX[w.arrival]; wx != nil {
						ew.HasExtra = true
						ew.Permits, ew.Delay, ew.Revocable, ew.Priority = wx.permits, wx.delay, wx.revocable, wx.priority
					}
					en.Waiters = append(en.Waiters, ew)
				}
				if kv := e.kv; kv != nil {
					addLease(kv.lease)
					en.KV = &ExKV{Value: kv.value, Version: kv.version, CreateRev: kv.createRev, ModRev: kv.modRev, Lease: kv.lease}
				}
				if e.leader != nil {
					en.HasLeader, en.Leader = true, e.leader
				}
			}
			x.Nodes = append(x.Nodes, en)
			return true
		})
	}
	for _, p := range s.delayedIn(q.Start, q.End) {
		if tn := s.trie.Find(p); tn == nil || !slotInUse(tn) {
			x.Nodes = append(x.Nodes, ExNode{Path: p, DelayEnd: s.delays[p]})
		}
	}
	for c := s.lru.head; c != nil; c = c.next {
		ec := ExClient{ID: c.id, Floor: c.floor}
		for _, e := range c.sortedRecords(nil) {
			seq, rec := e.seq, e.rec
			if rec.w != nil {
				continue
			}
			ec.Records = append(ec.Records, ExRecord{Seq: seq, Op: rec.op, Code: rec.code, Mode: rec.mode, Count: rec.count,
				Msg: rec.msg, Token: rec.token, Lease: rec.lease, Version: rec.version, Rev: rec.rev, TTL: rec.ttl,
				Lingering: rec.lingering, Sum: rec.sum})
		}
		if len(ec.Records) > 0 {
			x.Clients = append(x.Clients, ec)
		}
	}
	return x, nil
}

// Chunks encodes the export as install payloads of about maxBytes each (a
// single node or client larger than that gets a chunk of its own). Nodes
// come first, in path order, then clients; each chunk carries the leases its
// own entries name. There is always at least one chunk.
func (x *RangeExport) Chunks(maxBytes int) ([][]byte, error) {
	leases := map[uint64]ExLease{}
	for _, l := range x.Leases {
		leases[l.ID] = l
	}
	var out [][]byte
	cur := &RangeExport{Fence: x.Fence, Rev: x.Rev}
	flush := func() error {
		b, err := msgpack.Marshal(cur)
		if err != nil {
			return err
		}
		out = append(out, b)
		cur = &RangeExport{Fence: x.Fence, Rev: x.Rev}
		return nil
	}
	need := func(id uint64) {
		if l, ok := leases[id]; ok && id != 0 {
			if cur.leased == nil {
				cur.leased = map[uint64]bool{}
			}
			if !cur.leased[id] {
				cur.leased[id] = true
				cur.Leases = append(cur.Leases, l)
				cur.size += 16 + len(l.Owner)
			}
		}
	}
	for _, n := range x.Nodes {
		sz := nodeSize(&n)
		if cur.size > 0 && cur.size+sz > maxBytes {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		for _, h := range n.Holders {
			if !h.Single {
				need(h.Lease)
			}
		}
		for _, w := range n.Waiters {
			need(w.Lease)
		}
		if n.KV != nil {
			need(n.KV.Lease)
		}
		cur.Nodes = append(cur.Nodes, n)
		cur.size += sz
	}
	for _, c := range x.Clients {
		sz := 16 + 64*len(c.Records)
		if cur.size > 0 && cur.size+sz > maxBytes {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		cur.Clients = append(cur.Clients, c)
		cur.size += sz
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

func nodeSize(n *ExNode) int {
	sz := 32 + len(n.Path) + len(n.Leader)
	for _, h := range n.Holders {
		sz += 40 + len(h.Owner)
	}
	for _, w := range n.Waiters {
		sz += 64 + len(w.Owner) + len(w.Value)
	}
	if n.KV != nil {
		sz += 48 + len(n.KV.Value)
	}
	return sz
}

// opInstallRange installs one chunk of a range this shard does not own yet
// (Ranges[0], Gen = move id). Installing is idempotent: a path that already
// has state here came from an earlier copy of the same chunk (a shard never
// holds state in a range it does not own, except what a move put there), so
// it is skipped. The final chunk (FlagMoveFinal) takes ownership.
func (s *StateMachine) opInstallRange(r *wire.Request, out *wire.Response) *wire.Error {
	rg, err := moveRange(r)
	if err != nil {
		return err
	}
	if rg.Shard != s.cfg.ShardID {
		return wire.Errorf(wire.InvalidArgument, "install names shard %d, this is shard %d", rg.Shard, s.cfg.ShardID)
	}
	if s.ownedIndex(rg.Start, rg.End) >= 0 {
		return nil // already installed and owned: a repeat
	}
	var x RangeExport
	if len(r.Value) > 0 {
		if err := msgpack.Unmarshal(r.Value, &x); err != nil {
			return wire.Errorf(wire.Malformed, "range chunk: %v", err)
		}
	}
	if err := s.checkOverlap(rg); err != nil {
		return err
	}
	if err := s.checkInstall(&x, rg); err != nil {
		return err
	}
	if x.Fence > s.floor {
		s.floor = x.Fence
		s.emit(wire.Event{Kind: wire.EvFence, Token: x.Fence})
	}
	s.rev = max(s.rev, x.Rev)
	gone := map[uint64]bool{}
	for _, el := range x.Leases {
		if s.leases[el.ID] != nil {
			continue
		}
		if _, dead := s.tombs[el.ID]; dead || el.ID&SingleLeaseBit != 0 {
			gone[el.ID] = true // ended here already: its entries are not installed
			continue
		}
		l := &lease{id: el.ID, ttl: el.TTL, owner: internIdentity(el.Owner), ten: s.tenantOf(el.Owner)}
		l.rev = s.emit(wire.Event{Kind: wire.EvLease, Lease: el.ID, TTL: el.TTL})
		s.leases[el.ID] = l
		if l.ten != nil {
			l.ten.leases++
		}
	}
	for i := range x.Nodes {
		s.installNode(&x.Nodes[i], gone)
	}
	for i := range x.Clients {
		s.installClient(&x.Clients[i])
	}
	if r.Has(wire.FlagMoveFinal) {
		s.takeOwnership(rg)
		out.Ranges = slices.Clone(s.ranges)
	}
	out.Token = max(s.fence, s.floor)
	return nil
}

// checkInstall refuses a chunk that cannot be installed, before anything
// changes: paths outside the range, and single-lock lease tokens that a
// lock of this shard already uses (a single lease's id is its token).
func (s *StateMachine) checkInstall(x *RangeExport, rg wire.Range) *wire.Error {
	for i := range x.Nodes {
		n := &x.Nodes[i]
		if err := s.validPath(n.Path); err != nil {
			return err
		}
		k, _ := wire.Span(n.Path, s.cfg.SplitDepth)
		if wire.PathDepth(n.Path) < s.cfg.SplitDepth || k < rg.Start || (rg.End != "" && k >= rg.End) {
			return wire.Errorf(wire.InvalidArgument, "%s is outside the range being installed", n.Path)
		}
		if tn := s.trie.Find(n.Path); tn != nil && slotInUse(tn) {
			continue // installed before
		}
		for _, h := range n.Holders {
			if h.Token == 0 || h.Count == 0 || h.Mode > wire.Shared {
				return wire.Errorf(wire.InvalidArgument, "bad holder of %s", n.Path)
			}
			if h.Single && s.singles.get(h.Token) != nil {
				return wire.Errorf(wire.Conflict, "single-lock lease token %d of %s is in use on shard %d", h.Token, n.Path, s.cfg.ShardID)
			}
		}
		for _, w := range n.Waiters {
			if w.Mode > wire.Shared {
				return wire.Errorf(wire.InvalidArgument, "bad waiter of %s", n.Path)
			}
		}
	}
	return nil
}

func (s *StateMachine) installNode(en *ExNode, gone map[uint64]bool) {
	if tn := s.trie.Find(en.Path); tn != nil && slotInUse(tn) || s.delays[en.Path] != 0 {
		return
	}
	if en.DelayEnd > s.delays[en.Path] {
		s.delays[en.Path] = en.DelayEnd
		s.timersChanged = true
	}
	n := s.trie.Ensure(en.Path)
	defer s.tidy(n)
	path := strings.Clone(en.Path)
	for _, eh := range en.Holders {
		if !eh.Single && (gone[eh.Lease] || s.leases[eh.Lease] == nil) {
			continue
		}
		h := &n.Val.first
		if h.token != 0 {
			h = &holder{}
			e := n.Val.extension()
			e.more = append(e.more, h)
		}
		*h = holder{node: n, owner: eh.Owner, lw: eh.Lease, token: eh.Token, count: eh.Count, mode: eh.Mode, campaign: eh.Campaign}
		if eh.Delay != 0 || eh.Revocable || eh.RevokeAt != 0 {
			s.holdX[h.token] = &holdExtra{h: h, delay: eh.Delay, revocable: eh.Revocable, revokeAt: eh.RevokeAt}
			s.timersChanged = s.timersChanged || eh.RevokeAt != 0
		}
		s.trie.AddHeld(n, eh.Mode, 1)
		s.nLocks++
		if eh.Single {
			id := SingleLeaseBit | eh.Token
			rev := s.emit(wire.Event{Kind: wire.EvLease, Lease: id, TTL: eh.TTL, Path: path, Token: eh.Token})
			h.setSingle(eh.TTL, rev)
			s.singles.put(h)
			if eh.Identity != "" {
				s.singleOwn[h.token] = internIdentity(eh.Identity)
				s.tenantOf(eh.Identity).countHold(true, 1)
			}
		} else {
			l := s.leases[eh.Lease]
			l.addHolder(h)
			l.ten.countHold(false, 1)
		}
	}
	for i := range en.Waiters {
		ew := &en.Waiters[i]
		if ew.Lease != 0 && (gone[ew.Lease] || s.leases[ew.Lease] == nil) {
			continue
		}
		w := &waiter{node: n, owner: ew.Owner, lease: ew.Lease, ttl: ew.TTL, client: ew.Client, seq: ew.Seq,
			arrival: ew.Arrival, value: ew.Value, mode: ew.Mode, campaign: ew.Campaign}
		e := n.Val.extension()
		if e.tail == nil {
			e.head = w
		} else {
			e.tail.next, w.prev = w, e.tail
		}
		e.tail = w
		s.trie.AddQueued(n, w.mode, 1)
		s.nWaiters++
		if ew.Identity != "" && ew.Lease == 0 {
			s.waitOwn[w.arrival] = internIdentity(ew.Identity)
			s.tenantOf(ew.Identity).countWait(true, 1)
		}
		if ew.HasExtra {
			s.waitX[w.arrival] = &waitExtra{permits: ew.Permits, delay: ew.Delay, revocable: ew.Revocable, priority: ew.Priority}
		}
		if l := s.leases[w.lease]; w.lease != 0 && l != nil {
			l.addWaiter(w)
			l.ten.countWait(false, 1)
		}
		if ew.Op != 0 && w.client != 0 {
			c := s.installedClient(w.client, ew.Floor)
			if c.record(w.seq) == nil {
				c.put(w.seq, &outcome{op: ew.Op, code: wire.Queued, mode: w.mode, lease: w.lease, w: w,
					sum: requestSum(en.Path, nil, w.lease)})
				c.waiting++
			}
		}
	}
	if ek := en.KV; ek != nil && !(ek.Lease != 0 && (gone[ek.Lease] || s.leases[ek.Lease] == nil)) {
		e := n.Val.extension()
		e.kv = &kvEntry{value: ek.Value, version: ek.Version, createRev: ek.CreateRev, modRev: ek.ModRev, lease: ek.Lease}
		s.nKVs++
		if ek.Lease != 0 {
			s.leases[ek.Lease].addKey(n)
		}
	}
	if en.HasLeader && n.Val.first.token != 0 {
		n.Val.extension().leader = leaderValue(en.Leader)
	}
	if en.Permits > 0 && n.HeldHere() > 0 {
		s.sems[en.Path] = en.Permits
	}
}

// installedClient returns the client record, created with the source's
// floor when this shard has not seen the client.
func (s *StateMachine) installedClient(id, floor uint64) *client {
	c := s.clients[id]
	if c == nil {
		c = newClient(id, floor)
		s.clients[id] = c
		c.lastSeen = s.now
		s.lru.pushBack(c)
	}
	return c
}

func (s *StateMachine) installClient(ec *ExClient) {
	c := s.installedClient(ec.ID, ec.Floor)
	for _, er := range ec.Records {
		if er.Seq < c.floor && !er.Lingering || c.record(er.Seq) != nil {
			continue
		}
		rec := &outcome{op: er.Op, code: er.Code, mode: er.Mode, count: er.Count, msg: er.Msg, token: er.Token,
			lease: er.Lease, version: er.Version, rev: er.Rev, ttl: er.TTL, sum: er.Sum}
		if er.Lingering && er.Seq < c.floor {
			c.linger(er.Seq, rec)
		}
		c.put(er.Seq, rec)
	}
}
