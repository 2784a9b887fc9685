package raftnode

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// Raft traffic between nodes. dragonboat's own TCP transport writes every
// message batch with three write syscalls (magic, header, payload) and reads
// it back with three or more reads; with many shards a node exchanges
// thousands of small batches a second, and those syscalls were about a sixth
// of a node's CPU under load and most of its idle cost (docs/performance.md).
// This transport frames each batch once and sends it with one write, and
// reads through a buffer, so a burst of batches costs one read.
//
// Wire format, per connection: an 8-byte preamble, then frames of
// kind (1 byte) | payload length (4, big endian) | CRC-32C of the payload (4)
// | payload (a protobuf MessageBatch or Chunk from raftpb). A snapshot
// connection ends with a bye frame the receiver acknowledges with one byte,
// so SendChunk's caller knows every chunk was handed over before Close
// returns. It does not interoperate with dragonboat's TCP transport: every
// node of a cluster must run the same one.

var transportPreamble = [8]byte{'W', 'D', 'N', 'R', 'A', 'F', 'T', '1'}

const (
	frameBatch byte = 1
	frameChunk byte = 2
	frameBye   byte = 3

	frameHeader = 9
	// maxRaftFrame bounds one frame: dragonboat caps a message batch at
	// 64 MiB (plus one message) and a snapshot chunk at 2 MiB.
	maxRaftFrame = 256 << 20

	raftWriteTimeout = 10 * time.Second
	raftDialTimeout  = 5 * time.Second
	raftKeepAlive    = 5 * time.Second
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

var errBadRaftFrame = errors.New("shard: malformed raft transport frame")

// raftTraffic counts, process-wide, what this transport sent: message
// batches, the Raft messages in them, and the write syscalls that carried
// them (benchmarks report them per operation).
var raftTraffic struct{ batches, messages, writes atomic.Uint64 }

// RaftTraffic reports the message batches, Raft messages and write
// syscalls every Raft transport of this process has sent so far.
func RaftTraffic() (batches, messages, writes uint64) {
	return raftTraffic.batches.Load(), raftTraffic.messages.Load(), raftTraffic.writes.Load()
}

// TransportFactory makes the node's Raft transport (config.TransportFactory).
type TransportFactory struct {
	// CommitHold is how long a commit-only Replicate is held for a message
	// that makes it redundant (commithold.go; 0: DefaultCommitHold,
	// negative: none is held).
	CommitHold time.Duration
}

// Create implements config.TransportFactory.
func (f TransportFactory) Create(nhc config.NodeHostConfig, onBatch raftio.MessageHandler, onChunk raftio.ChunkHandler) raftio.ITransport {
	hold := f.CommitHold
	if hold == 0 {
		hold = DefaultCommitHold
	}
	return &raftTransport{nhc: nhc, onBatch: onBatch, onChunk: onChunk, conns: map[net.Conn]struct{}{},
		pairs: map[string]*pairConn{}, hold: hold}
}

// Validate implements config.TransportFactory: a host:port address.
func (TransportFactory) Validate(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && p > 0 && p < 65536
}

type raftTransport struct {
	nhc     config.NodeHostConfig
	onBatch raftio.MessageHandler
	onChunk raftio.ChunkHandler

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{} // accepted, closed by Close
	pairs  map[string]*pairConn  // outgoing, one per peer, shared by dragonboat's streams
	hold   time.Duration         // commit-only Replicates' hold (<= 0: none)
	closed bool
	wg     sync.WaitGroup
}

func (t *raftTransport) Name() string { return "warden-tcp" }

func (t *raftTransport) Start() error {
	tlsCfg, err := t.nhc.GetServerTLSConfig()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", t.nhc.GetListenAddress())
	if err != nil {
		return err
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	t.mu.Lock()
	t.ln = ln
	t.mu.Unlock()
	t.wg.Add(1)
	go t.accept(ln)
	return nil
}

func (t *raftTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	if t.ln != nil {
		t.ln.Close()
	}
	for c := range t.conns {
		c.Close()
	}
	pairs := make([]*pairConn, 0, len(t.pairs))
	for _, p := range t.pairs {
		pairs = append(pairs, p)
	}
	t.mu.Unlock()
	for _, p := range pairs {
		p.stopHold() // held messages are dropped; dragonboat closes the streams
	}
	t.wg.Wait()
	return nil
}

func (t *raftTransport) accept(ln net.Listener) {
	defer t.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return // closed
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.conns[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go func() {
			defer t.wg.Done()
			t.serve(c)
			c.Close()
			t.mu.Lock()
			delete(t.conns, c)
			t.mu.Unlock()
		}()
	}
}

// serve reads frames until the connection ends or sends garbage.
func (t *raftTransport) serve(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		c.SetDeadline(time.Now().Add(raftDialTimeout))
		if err := tc.Handshake(); err != nil {
			return
		}
		c.SetDeadline(time.Time{})
	}
	br := bufio.NewReaderSize(c, 64<<10)
	var pre [8]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil || pre != transportPreamble {
		return
	}
	var buf []byte
	for {
		kind, body, err := readRaftFrame(br, buf)
		if err != nil {
			return
		}
		buf = body
		switch kind {
		case frameBatch:
			var mb pb.MessageBatch
			if mb.Unmarshal(body) != nil {
				return
			}
			passes.recvBatches.Add(1)
			passes.recvMessages.Add(uint64(len(mb.Requests)))
			t.onBatch(mb) // copies what it keeps: body is reused
		case frameChunk:
			var ch pb.Chunk
			if ch.Unmarshal(body) != nil {
				return
			}
			if !t.onChunk(ch) {
				return
			}
		case frameBye:
			c.SetWriteDeadline(time.Now().Add(raftWriteTimeout))
			c.Write([]byte{frameBye})
			return
		default:
			return
		}
	}
}

// readRaftFrame reads one frame into buf (grown as needed).
func readRaftFrame(br *bufio.Reader, buf []byte) (byte, []byte, error) {
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return 0, buf, err
	}
	n := binary.BigEndian.Uint32(hdr[1:5])
	if n > maxRaftFrame {
		return 0, buf, fmt.Errorf("%w: %d bytes", errBadRaftFrame, n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(br, buf); err != nil {
		return 0, buf, err
	}
	if crc32.Checksum(buf, crcTable) != binary.BigEndian.Uint32(hdr[5:9]) {
		return 0, buf, fmt.Errorf("%w: checksum mismatch", errBadRaftFrame)
	}
	return hdr[0], buf, nil
}

// marshaler is what raftpb's MessageBatch and Chunk have in common.
type marshaler interface {
	MarshalTo([]byte) (int, error)
}

// appendRaftFrame encodes m (of at most size bytes) as one frame into buf.
func appendRaftFrame(buf []byte, kind byte, m marshaler, size int) ([]byte, error) {
	buf = frameRoom(buf, size)
	n := 0
	if m != nil {
		var err error
		if n, err = m.MarshalTo(buf[frameHeader:]); err != nil {
			return buf, err
		}
	}
	return sealRaftFrame(buf, kind, n)
}

// frameRoom returns buf resized to hold a frame of up to size bytes; the
// caller marshals into buf[frameHeader:] and seals it.
func frameRoom(buf []byte, size int) []byte {
	if cap(buf) < frameHeader+size {
		buf = make([]byte, frameHeader+size)
	}
	return buf[:frameHeader+size]
}

// sealRaftFrame writes the header of a frame whose n-byte body is in place.
func sealRaftFrame(buf []byte, kind byte, n int) ([]byte, error) {
	if n > maxRaftFrame {
		return buf, fmt.Errorf("%w: %d bytes to send", errBadRaftFrame, n)
	}
	buf[0] = kind
	binary.BigEndian.PutUint32(buf[1:5], uint32(n))
	binary.BigEndian.PutUint32(buf[5:9], crc32.Checksum(buf[frameHeader:frameHeader+n], crcTable))
	return buf[:frameHeader+n], nil
}

func (t *raftTransport) dial(ctx context.Context, target string) (net.Conn, error) {
	d := net.Dialer{Timeout: raftDialTimeout, KeepAlive: raftKeepAlive}
	c, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := t.nhc.GetClientTLSConfig(target)
	if err != nil {
		c.Close()
		return nil, err
	}
	if tlsCfg != nil {
		tc := tls.Client(c, tlsCfg)
		hctx, cancel := context.WithTimeout(ctx, raftDialTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	c.SetWriteDeadline(time.Now().Add(raftWriteTimeout))
	if _, err := c.Write(transportPreamble[:]); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (t *raftTransport) GetConnection(ctx context.Context, target string) (raftio.IConnection, error) {
	t.mu.Lock()
	p := t.pairs[target]
	if p == nil {
		p = &pairConn{ctx: ctx, target: target, dial: t.dial, gen: 1}
		p.cond.L = &p.mu
		if t.hold > 0 {
			p.hold = newCommitHold(t.hold)
		}
		t.pairs[target] = p
	}
	p.refs++
	t.mu.Unlock()
	b := &batchConn{t: t, p: p}
	if err := p.ready(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (t *raftTransport) GetSnapshotConnection(ctx context.Context, target string) (raftio.ISnapshotConnection, error) {
	c, err := t.dial(ctx, target)
	if err != nil {
		return nil, err
	}
	return &chunkConn{c: c}, nil
}

// batchConn is one of dragonboat's message streams to a peer; dragonboat
// calls each from one goroutine. dragonboat keeps several streams per peer
// (shards are spread over them by id), and at many shards every step round
// wakes all of them at once with a few messages each: sent on their own
// connections, that was one write and one read per stream where one would
// do. So all streams to a peer share one connection (pairConn) and write
// through it together.
type batchConn struct {
	t      *raftTransport
	p      *pairConn
	closed bool
}

func (b *batchConn) SendMessageBatch(batch pb.MessageBatch) error {
	return b.p.send(&batch)
}

// Close releases the stream's share of the connection; the last one closes it.
func (b *batchConn) Close() {
	if b.closed {
		return
	}
	b.closed = true
	b.t.mu.Lock()
	b.p.refs--
	last := b.p.refs == 0
	if last && b.t.pairs[b.p.target] == b.p {
		delete(b.t.pairs, b.p.target)
	}
	b.t.mu.Unlock()
	if last {
		b.p.close()
	}
}

// pairConn is the connection to one peer that every stream to it shares.
// A stream appends its batch's frame to pending and waits until a write
// carried it; the first stream to find no write under way does the
// writing (group commit, no goroutine of its own): it writes everything
// pending with one syscall, again while more arrived during the write. It
// does not yield first: with one stream per peer (dragonboat.go) no other
// stream of the same step round is there to wait for, and the yield only
// delayed the write (one-client operations per second 1.00–1.17× without
// it, median 1.07× in 7 pairs). Frames
// that arrive during a write (the commit-hold timer's, a second host's in
// tests) still share the next one. Each stream gets the result of the
// write that carried its frame, so dragonboat's error handling (circuit
// breaker, unreachable reports) sees what it saw with a connection per
// stream.
//
// It replaces a connection the peer has closed before using it again.
// dragonboat keeps its streams open for as long as messages flow, up to a
// minute idle, and learns that one broke only when a write fails: the first
// write after the peer died (a restarted process, a dropped proxy) goes
// into the void, the next fails, and dragonboat then trips its per-peer
// circuit breaker and drops every message to that peer, for every shard,
// for 0.25–1 s. A follower seldom writes to a peer that is not its leader,
// so its connection to a node restarted earlier can still be the dead one when
// the leader was killed and an election needed it: the (pre-)vote messages
// would be lost and an election take 1.5–2 s instead of 0.2–0.3 s
// (docs/testing.md, "Results"). A batch connection carries nothing back, so a read
// that returns means the peer closed it; the watcher marks it dead, and the
// next write goes on a new connection. A write that still fails is retried
// once on a new connection (Raft tolerates lost and duplicated messages);
// only when that fails too does dragonboat hear of it.
type pairConn struct {
	ctx    context.Context
	target string
	dial   func(context.Context, string) (net.Conn, error)
	refs   int // streams using it (guarded by raftTransport.mu)

	mu       sync.Mutex
	cond     sync.Cond // on mu: a write finished
	pending  []byte    // frames not yet handed to a write
	spare    []byte    // the previous write's buffer, reused
	gen      uint64    // the write that will carry pending (writes are numbered from 1)
	written  uint64    // the last write that finished
	errs     [8]error  // errs[g%8]: the result of write g
	writing  bool      // a stream is writing (and owns c, dead)
	shutdown bool

	c    net.Conn
	dead chan struct{} // closed when the peer closed c (or sent anything)

	// Commit-only Replicates held back (commithold.go), nil when holding
	// is off. A timer sends those due on their own; flushes counts the
	// timer's runs, armed or running, so that close can wait for them.
	hold    *commitHold
	timer   *time.Timer
	armed   bool
	flushes sync.WaitGroup
	header  pb.MessageBatch // the last batch's addressing, for the timer's batches
	scratch []pb.Message    // a batch's messages to send now, reused
}

// send frames batch into pending and returns once a write carried it.
// Commit-only Replicates it carries may be held (commithold.go): a batch
// of nothing else returns at once.
func (p *pairConn) send(batch *pb.MessageBatch) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hold != nil && (len(p.hold.held) > 0 || hasCommitOnly(batch.Requests)) {
		p.scratch = p.hold.admit(p.scratch[:0], batch.Requests, time.Now())
		p.header = pb.MessageBatch{DeploymentId: batch.DeploymentId, SourceAddress: batch.SourceAddress, BinVer: batch.BinVer}
		p.armHold()
		if len(p.scratch) == 0 {
			return nil
		}
		batch.Requests = p.scratch
	}
	err := p.frame(batch)
	if err == nil {
		// This goroutine runs, and writes the frame next (sendfirst.go).
		noteSent(batch.Requests)
	}
	clear(p.scratch) // keeps no entries of the caller's
	if err != nil {
		return err
	}
	return p.await()
}

// frame appends batch's frame to pending; mu is held.
func (p *pairConn) frame(batch *pb.MessageBatch) error {
	// Marshalled in place rather than through appendRaftFrame: passing
	// batch as an interface moved every batch to the heap.
	start := len(p.pending)
	end := start + frameHeader + batch.SizeUpperLimit()
	if cap(p.pending) < end {
		grown := make([]byte, start, max(end, 2*cap(p.pending)))
		copy(grown, p.pending)
		p.pending = grown
	}
	n, err := batch.MarshalTo(p.pending[start+frameHeader : end])
	if err == nil {
		_, err = sealRaftFrame(p.pending[start:end], frameBatch, n)
	}
	if err != nil {
		return err
	}
	p.pending = p.pending[:start+frameHeader+n]
	raftTraffic.batches.Add(1)
	raftTraffic.messages.Add(uint64(len(batch.Requests)))
	passes.sentShards.Add(batchShards(batch.Requests))
	return nil
}

// await returns the result of the write that carries what pending holds
// now, writing it if no one else is; mu is held.
func (p *pairConn) await() error {
	mine := p.gen
	for p.written < mine {
		if p.writing {
			p.cond.Wait()
			continue
		}
		p.writeAll()
	}
	if p.written-mine >= uint64(len(p.errs)) {
		return nil // too long ago to tell; Raft resends what was lost
	}
	return p.errs[mine%uint64(len(p.errs))]
}

func hasCommitOnly(reqs []pb.Message) bool {
	for i := range reqs {
		if isCommitOnly(&reqs[i]) {
			return true
		}
	}
	return false
}

// armHold starts the timer for the earliest held message unless it runs,
// and stops it when nothing is held (most held messages are dropped before
// they are due: a timer left to fire would wake a goroutine for nothing);
// mu is held.
func (p *pairConn) armHold() {
	if p.shutdown {
		return
	}
	first, ok := p.hold.next()
	if !ok {
		if p.armed && p.timer.Stop() {
			p.armed = false
			p.flushes.Done()
		}
		return
	}
	if p.armed {
		return
	}
	p.armed = true
	p.flushes.Add(1)
	d := time.Until(first)
	if p.timer == nil {
		p.timer = time.AfterFunc(d, p.flushHeld)
	} else {
		p.timer.Reset(d)
	}
}

// flushHeld sends the held messages that are due, and those due within a
// quarter of the hold (one batch rather than a timer each), as a batch of
// their own; it joins a write under way if there is one.
func (p *pairConn) flushHeld() {
	defer p.flushes.Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	if p.shutdown {
		return
	}
	p.scratch = p.hold.due(p.scratch[:0], time.Now().Add(p.hold.wait/4))
	p.armHold()
	if len(p.scratch) == 0 {
		return
	}
	batch := p.header
	batch.Requests = p.scratch
	err := p.frame(&batch)
	clear(p.scratch)
	if err == nil {
		p.await() // a failed write: Raft resends, as for any lost message
	}
}

// stopHold discards the held messages and waits for a timer run under way.
func (p *pairConn) stopHold() {
	p.mu.Lock()
	p.shutdown = true
	if p.armed && p.timer.Stop() {
		p.armed = false
		p.flushes.Done()
	}
	if p.hold != nil {
		p.hold.discard()
	}
	p.mu.Unlock()
	p.flushes.Wait()
}

// writeAll writes pending until nothing is left; mu is held on entry and
// exit, not during the writes.
func (p *pairConn) writeAll() {
	p.writing = true
	for len(p.pending) > 0 {
		buf, g := p.pending, p.gen
		p.pending, p.spare = p.spare[:0], nil
		p.gen++
		p.mu.Unlock()
		err := p.write(buf)
		p.mu.Lock()
		if cap(buf) <= 4<<20 { // do not pin a rare huge batch
			p.spare = buf[:0]
		}
		p.errs[g%uint64(len(p.errs))] = err
		p.written = g
		p.cond.Broadcast()
	}
	p.writing = false
	p.cond.Broadcast()
}

// ready makes sure a connection is open (dialling it now), so that
// GetConnection fails as before when the peer cannot be reached.
func (p *pairConn) ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.writing {
		p.cond.Wait()
	}
	if p.c != nil {
		return nil
	}
	p.writing = true
	p.mu.Unlock()
	err := p.connect()
	p.mu.Lock()
	p.writing = false
	p.cond.Broadcast() // streams that queued frames meanwhile write them
	return err
}

// connect dials a new connection and starts its watcher; only the writer
// calls it.
func (p *pairConn) connect() error {
	c, err := p.dial(p.ctx, p.target)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.shutdown {
		p.mu.Unlock()
		c.Close()
		return net.ErrClosed
	}
	if p.c != nil {
		p.c.Close()
	}
	dead := make(chan struct{})
	p.c, p.dead = c, dead
	p.mu.Unlock()
	go func() {
		var one [1]byte
		c.Read(one[:]) // returns when the peer (or Close) ends it
		close(dead)
	}()
	return nil
}

// deadSignal is closed when the peer closes the current connection.
func (p *pairConn) deadSignal() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

func (p *pairConn) broken() bool {
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}

// write sends buf, redialling a connection the peer closed, and retries
// once on a new connection; only the writer calls it.
func (p *pairConn) write(buf []byte) error {
	redialed := false
	if p.c == nil || p.broken() {
		if err := p.connect(); err != nil {
			return err
		}
		redialed = true
	}
	err := p.writeOnce(buf)
	if err == nil || redialed {
		return err
	}
	// Declared only on failure: its escaping address would cost an
	// allocation per write.
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err // a peer that stopped reading gets no second connection now
	}
	if err := p.connect(); err != nil {
		return err
	}
	return p.writeOnce(buf)
}

func (p *pairConn) writeOnce(buf []byte) error {
	raftTraffic.writes.Add(1)
	p.c.SetWriteDeadline(time.Now().Add(raftWriteTimeout))
	_, err := p.c.Write(buf)
	return err
}

func (p *pairConn) close() {
	p.mu.Lock()
	p.shutdown = true
	c := p.c
	p.mu.Unlock()
	if c != nil {
		c.Close() // first: a timer run under way then fails its write at once
	}
	p.stopHold()
}

// chunkConn streams one snapshot's chunks.
type chunkConn struct {
	c   net.Conn
	buf []byte
}

func (s *chunkConn) SendChunk(chunk pb.Chunk) error {
	var err error
	s.buf, err = appendRaftFrame(s.buf[:0], frameChunk, &chunk, chunk.Size())
	if err != nil {
		return err
	}
	s.c.SetWriteDeadline(time.Now().Add(raftWriteTimeout))
	_, err = s.c.Write(s.buf)
	return err
}

// Close says bye and waits (bounded) for the receiver to have consumed
// every chunk before closing.
func (s *chunkConn) Close() {
	defer s.c.Close()
	bye, _ := appendRaftFrame(nil, frameBye, nil, 0)
	s.c.SetDeadline(time.Now().Add(raftWriteTimeout))
	if _, err := s.c.Write(bye); err != nil {
		return
	}
	var ack [1]byte
	io.ReadFull(s.c, ack[:])
}

// ReadRaftSource reads a new Raft connection's preamble and first frame
// from br, for a proxy that must learn which node dialled before it forwards
// anything (the fault suite's per-link proxies); what br buffered beyond the
// first frame stays in br for the proxy to forward. It returns the bytes read,
// to be forwarded unchanged, and the sender the frame names: the Raft
// address of a message batch, or the replica id of a snapshot chunk. ok is
// false when r does not start like this transport's connections.
func ReadRaftSource(br *bufio.Reader) (raw []byte, addr string, replica uint64, ok bool) {
	var pre [8]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil || pre != transportPreamble {
		return nil, "", 0, false
	}
	kind, body, err := readRaftFrame(br, nil)
	if err != nil {
		return nil, "", 0, false
	}
	raw = make([]byte, 0, len(pre)+frameHeader+len(body))
	raw = append(raw, pre[:]...)
	var hdr [frameHeader]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:5], uint32(len(body)))
	binary.BigEndian.PutUint32(hdr[5:9], crc32.Checksum(body, crcTable))
	raw = append(append(raw, hdr[:]...), body...)
	switch kind {
	case frameBatch:
		var mb pb.MessageBatch
		if mb.Unmarshal(body) != nil {
			return nil, "", 0, false
		}
		return raw, mb.SourceAddress, 0, true
	case frameChunk:
		var ch pb.Chunk
		if ch.Unmarshal(body) != nil {
			return nil, "", 0, false
		}
		return raw, "", ch.From, true
	}
	return nil, "", 0, false
}
