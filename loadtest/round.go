package loadtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The round probe measures the floor under one replicated, durable write on
// this machine: what any consensus system with three replicas on one disk
// pays per commit before it does any work of its own. A client sends a
// 64-byte request to a leader; the leader forwards it to two followers and
// then appends it to its own log (4 KiB write + fdatasync); each follower
// appends and syncs and acknowledges; the leader answers once its own sync
// and one follower's acknowledgement are in (a quorum of two), and the
// client sends the next request. No batching, no state machine, no Raft:
// network hops, wake-ups and syncs only. One round is the least a one-client
// acquire can take, and a contended hand-off (the holder's release reaches
// the leader, commits, and the grant reaches the next holder) is one round
// as well, so 1/round bounds hand-offs per second on one lock.
//
// Replicas run as separate processes (cmd/roundprobe) so that every hop
// crosses processes as it does between a load generator and three servers;
// ServeRoundReplica is one replica, RoundProbe the client.

const (
	roundFrame = 64 // request and forwarded entry
	roundAck   = 8  // acknowledgement and answer: the sequence number
)

// ReplicaConfig configures one replica of the round probe.
type ReplicaConfig struct {
	Dir       string   // where its log file goes
	Sync      bool     // append + fdatasync each entry (false: hops only)
	Followers []string // addresses of the followers: set on the leader only
}

// ServeRoundReplica serves ln until ctx ends or ln fails: a connection from
// the client (on the leader) or from the leader (on a follower) is served
// one frame at a time. On the leader, every client connection dials the
// followers afresh.
func ServeRoundReplica(ctx context.Context, ln net.Listener, cfg ReplicaConfig) error {
	wal, err := openSyncLog(filepath.Join(cfg.Dir, fmt.Sprintf("round-%d.log", os.Getpid())))
	if err != nil {
		return err
	}
	defer wal.close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // one append at a time on the shared log
		conns = map[net.Conn]bool{}
	)
	defer func() {
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { mu.Lock(); delete(conns, c); mu.Unlock(); c.Close() }()
			if len(cfg.Followers) == 0 {
				_ = serveFollower(c, wal, cfg.Sync, &mu)
			} else {
				_ = serveLeader(ctx, c, wal, cfg, &mu)
			}
		}()
	}
}

// append writes one entry and, when sync is set, waits for the disk.
func appendEntry(wal *syncLog, durable bool, mu *sync.Mutex, frame []byte) error {
	if !durable {
		return nil
	}
	mu.Lock()
	defer mu.Unlock()
	return wal.append(frame)
}

func serveFollower(c net.Conn, wal *syncLog, sync bool, mu *sync.Mutex) error {
	frame := make([]byte, roundFrame)
	for {
		if _, err := io.ReadFull(c, frame); err != nil {
			return err
		}
		if err := appendEntry(wal, sync, mu, frame); err != nil {
			return err
		}
		if _, err := c.Write(frame[:roundAck]); err != nil {
			return err
		}
	}
}

// serveLeader forwards each of the client's frames to the followers before
// its own append (as Raft leaders that send before they persist do) and
// answers once it has its own append and one acknowledgement for that frame.
func serveLeader(ctx context.Context, c net.Conn, wal *syncLog, cfg ReplicaConfig, mu *sync.Mutex) error {
	acks := make(chan uint64, 2*len(cfg.Followers))
	var fs []net.Conn
	defer func() {
		for _, f := range fs {
			f.Close()
		}
	}()
	for _, addr := range cfg.Followers {
		f, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		fs = append(fs, f)
		go func() {
			ack := make([]byte, roundAck)
			for {
				if _, err := io.ReadFull(f, ack); err != nil {
					return
				}
				acks <- binary.LittleEndian.Uint64(ack)
			}
		}()
	}
	frame := make([]byte, roundFrame)
	for {
		if _, err := io.ReadFull(c, frame); err != nil {
			return err
		}
		seq := binary.LittleEndian.Uint64(frame)
		for _, f := range fs {
			if _, err := f.Write(frame); err != nil {
				return err
			}
		}
		if err := appendEntry(wal, cfg.Sync, mu, frame); err != nil {
			return err
		}
		// A quorum of two: this replica and the first follower to
		// acknowledge this frame (a late acknowledgement of an earlier
		// frame is skipped).
		for got := false; !got; {
			select {
			case ack := <-acks:
				got = ack == seq
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if _, err := c.Write(frame[:roundAck]); err != nil {
			return err
		}
	}
}

// RoundProbe is the probe's client: one request at a time to the leader.
type RoundProbe struct {
	Leader   string
	Warmup   time.Duration
	Duration time.Duration
	Timeout  time.Duration // per round (default 1 s): a round not answered by then fails the probe
}

// Run measures rounds for p.Duration after p.Warmup and returns their
// latencies.
func (p RoundProbe) Run(ctx context.Context) (Stats, error) {
	if p.Timeout <= 0 {
		p.Timeout = time.Second
	}
	c, err := net.DialTimeout("tcp", p.Leader, 5*time.Second)
	if err != nil {
		return Stats{}, err
	}
	defer c.Close()
	h := NewHist()
	frame, ack := make([]byte, roundFrame), make([]byte, roundAck)
	start := time.Now()
	measureFrom, end := start.Add(p.Warmup), start.Add(p.Warmup+p.Duration)
	for seq := uint64(1); ; seq++ {
		if err := ctx.Err(); err != nil {
			return Stats{}, err
		}
		t0 := time.Now()
		if !t0.Before(end) {
			break
		}
		binary.LittleEndian.PutUint64(frame, seq)
		_ = c.SetDeadline(t0.Add(p.Timeout))
		if _, err := c.Write(frame); err != nil {
			return Stats{}, err
		}
		if _, err := io.ReadFull(c, ack); err != nil {
			return Stats{}, fmt.Errorf("round %d: %w", seq, err)
		}
		if got := binary.LittleEndian.Uint64(ack); got != seq {
			return Stats{}, fmt.Errorf("round %d answered as %d", seq, got)
		}
		if !t0.Before(measureFrom) {
			h.Record(time.Since(t0))
		}
	}
	if h.Count() == 0 {
		return Stats{}, errors.New("round probe: no round measured")
	}
	return h.Stats(p.Duration), nil
}

// syncLog is a preallocated file overwritten a block at a time, each write
// followed by an fdatasync: a log store's append on a recycled segment,
// without metadata updates.
type syncLog struct {
	f     *os.File
	block []byte
	next  int
}

func openSyncLog(path string) (*syncLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	l := &syncLog{f: f, block: make([]byte, probeBlock)}
	for i := range probeBlocks {
		if _, err := f.WriteAt(l.block, int64(i*probeBlock)); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// append writes data at the start of the next block and syncs it.
func (l *syncLog) append(data []byte) error {
	copy(l.block, data)
	if _, err := l.f.WriteAt(l.block, int64(l.next%probeBlocks*probeBlock)); err != nil {
		return err
	}
	l.next++
	return unix.Fdatasync(int(l.f.Fd()))
}

func (l *syncLog) close() {
	name := l.f.Name()
	l.f.Close()
	os.Remove(name)
}
