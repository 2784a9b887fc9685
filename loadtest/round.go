package loadtest

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// Replicas run as separate processes (ProbeRounds starts them from the
// running binary, which calls RoundReplicaMain first thing) so that every
// hop crosses processes as it does between a load generator and three
// servers; ServeRoundReplica is one replica, RoundProbe the client.

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
	// Named after the listener: replicas may share a process (tests) and a
	// directory.
	name := "round-" + strings.NewReplacer(":", "-", "[", "", "]", "").Replace(ln.Addr().String()) + ".log"
	wal, err := openSyncLog(filepath.Join(cfg.Dir, name))
	if err != nil {
		return err
	}
	defer wal.close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var (
		wg     sync.WaitGroup
		logMu  sync.Mutex // one append at a time on the shared log
		connMu sync.Mutex // guards conns
		conns  = map[net.Conn]bool{}
	)
	defer func() {
		connMu.Lock()
		for c := range conns {
			c.Close()
		}
		connMu.Unlock()
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
		connMu.Lock()
		conns[c] = true
		connMu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { connMu.Lock(); delete(conns, c); connMu.Unlock(); c.Close() }()
			if len(cfg.Followers) == 0 {
				_ = serveFollower(c, wal, cfg.Sync, &logMu)
			} else {
				_ = serveLeader(ctx, c, wal, cfg, &logMu)
			}
		}()
	}
}

// appendEntry writes one entry to the log and waits for the disk, when
// durable is set (the hops-only probe writes nothing).
func appendEntry(wal *syncLog, durable bool, mu *sync.Mutex, frame []byte) error {
	if !durable {
		return nil
	}
	mu.Lock()
	defer mu.Unlock()
	return wal.append(frame)
}

func serveFollower(c net.Conn, wal *syncLog, durable bool, mu *sync.Mutex) error {
	frame := make([]byte, roundFrame)
	for {
		if _, err := io.ReadFull(c, frame); err != nil {
			return err
		}
		if err := appendEntry(wal, durable, mu, frame); err != nil {
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

// Run measures rounds for p.Duration after p.Warmup: their latencies, the
// stalls met and the ceiling they set (Sync is the caller's to fill in).
func (p RoundProbe) Run(ctx context.Context) (RoundFacts, error) {
	var facts RoundFacts
	if p.Timeout <= 0 {
		p.Timeout = time.Second
	}
	c, err := net.DialTimeout("tcp", p.Leader, 5*time.Second)
	if err != nil {
		return facts, err
	}
	defer c.Close()
	h := NewHist()
	frame, ack := make([]byte, roundFrame), make([]byte, roundAck)
	start := time.Now()
	measureFrom, end := start.Add(p.Warmup), start.Add(p.Warmup+p.Duration)
	for seq := uint64(1); ; seq++ {
		if err := ctx.Err(); err != nil {
			return facts, err
		}
		t0 := time.Now()
		if !t0.Before(end) {
			break
		}
		binary.LittleEndian.PutUint64(frame, seq)
		_ = c.SetDeadline(t0.Add(p.Timeout))
		if _, err := c.Write(frame); err != nil {
			return facts, err
		}
		if _, err := io.ReadFull(c, ack); err != nil {
			return facts, fmt.Errorf("round %d: %w", seq, err)
		}
		if got := binary.LittleEndian.Uint64(ack); got != seq {
			return facts, fmt.Errorf("round %d answered as %d", seq, got)
		}
		if !t0.Before(measureFrom) {
			h.Record(time.Since(t0))
		}
	}
	if h.Count() == 0 {
		return facts, errors.New("round probe: no round measured")
	}
	facts.Rounds = h.Stats(p.Duration)
	facts.SlowPerSec = float64(h.CountOver(SlowSync)) / p.Duration.Seconds()
	if facts.Rounds.MeanMs > 0 {
		facts.Ceiling = 1000 / facts.Rounds.MeanMs
	}
	return facts, nil
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

// roundReplicaEnv, set in a process's environment, makes RoundReplicaMain
// serve one replica ("dir|sync|follower,follower") instead of returning.
const roundReplicaEnv = "WARDEN_ROUND_REPLICA"

// roundReplicas is set once the binary called RoundReplicaMain: only then
// can ProbeRounds start it as a replica.
var roundReplicas bool

// RoundReplicaMain must be the first call in main of a binary that uses
// ProbeRounds. In a replica process started by ProbeRounds it serves,
// printing its address on standard output, until its standard input closes
// (its parent is gone) and then exits; otherwise it returns at once.
func RoundReplicaMain() {
	roundReplicas = true
	spec, ok := os.LookupEnv(roundReplicaEnv)
	if !ok {
		return
	}
	if err := serveReplicaProcess(spec); err != nil {
		fmt.Fprintln(os.Stderr, "round probe replica:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveReplicaProcess(spec string) error {
	parts := strings.SplitN(spec, "|", 3)
	if len(parts) != 3 {
		return fmt.Errorf("bad %s %q", roundReplicaEnv, spec)
	}
	cfg := ReplicaConfig{Dir: parts[0], Sync: parts[1] == "sync"}
	if parts[2] != "" {
		cfg.Followers = strings.Split(parts[2], ",")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return ServeRoundReplica(ctx, ln, cfg)
}

// RoundFacts is one probe of rounds: with fdatasyncs (Sync) or the hops
// between processes alone.
type RoundFacts struct {
	Sync   bool  `json:"sync"`
	Rounds Stats `json:"rounds"`
	// SlowPerSec is how many rounds a second took over SlowSync: the
	// disk's stalls as a sequential writer meets them.
	SlowPerSec float64 `json:"slow_per_s"`
	// Ceiling is the hand-offs per second one lock could see if a hand-off
	// cost exactly one of these rounds (1 / mean round).
	Ceiling float64 `json:"ceiling_per_s"`
}

// ProbeRounds starts two followers and a leader as processes of this
// binary (which must call RoundReplicaMain), measures rounds against the
// leader for duration after warmup, and stops them.
func ProbeRounds(ctx context.Context, dir string, durable bool, warmup, duration time.Duration) (RoundFacts, error) {
	if !roundReplicas {
		return RoundFacts{}, errors.New("round probe: this binary does not call loadtest.RoundReplicaMain")
	}
	self, err := os.Executable()
	if err != nil {
		return RoundFacts{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var cmds []*exec.Cmd
	defer func() {
		cancel() // kills the replicas
		for _, c := range cmds {
			_ = c.Wait()
		}
	}()
	mode := "hops"
	if durable {
		mode = "sync"
	}
	start := func(followers []string) (string, error) {
		c := exec.CommandContext(ctx, self)
		c.Env = append(os.Environ(), roundReplicaEnv+"="+dir+"|"+mode+"|"+strings.Join(followers, ","))
		c.Stderr = os.Stderr
		// The replica lives while its standard input is open: if this
		// process dies without killing it, it stops by itself.
		if _, err := c.StdinPipe(); err != nil {
			return "", err
		}
		out, err := c.StdoutPipe()
		if err != nil {
			return "", err
		}
		if err := c.Start(); err != nil {
			return "", err
		}
		cmds = append(cmds, c)
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("round probe replica did not say where it listens: %w", err)
		}
		return strings.TrimSpace(line), nil
	}
	var followers []string
	for range 2 {
		addr, err := start(nil)
		if err != nil {
			return RoundFacts{}, err
		}
		followers = append(followers, addr)
	}
	leader, err := start(followers)
	if err != nil {
		return RoundFacts{}, err
	}
	facts, err := RoundProbe{Leader: leader, Warmup: warmup, Duration: duration}.Run(ctx)
	facts.Sync = durable
	return facts, err
}

// String is the probe as one phrase for a report.
func (f RoundFacts) String() string {
	what := "network hops only"
	if f.Sync {
		what = "with an fdatasync on each replica"
	}
	s := f.Rounds
	return fmt.Sprintf("one client, a leader and two followers as processes, %s: round p50 %.2f ms, p99 %.2f ms, p99.9 %.1f ms, mean %.2f ms (%d rounds, %.1f a second over %v), i.e. at most %.0f hand-offs/s on one lock",
		what, s.P50Ms, s.P99Ms, s.P999Ms, s.MeanMs, s.Count, f.SlowPerSec, SlowSync, f.Ceiling)
}

// ProbeFloor measures the machine's floor under one replicated durable
// write for about d (ProbeRounds with syncs, logs under dir) and keeps it
// in m; a probe that fails is noted in the report instead.
func (m *Machine) ProbeFloor(ctx context.Context, dir string, d time.Duration) {
	f, err := ProbeRounds(ctx, dir, true, d/4, d)
	if err != nil {
		m.FloorError = err.Error()
		return
	}
	m.Floor = &f
}

// FloorLine is the floor probe as a sentence for a report ("" if not run).
func (m Machine) FloorLine() string {
	switch {
	case m.Floor != nil:
		return "Floor of one replicated durable write on this machine (loadtest/cmd/roundprobe): " + m.Floor.String() + "."
	case m.FloorError != "":
		return "Floor probe failed: " + m.FloorError + "."
	}
	return ""
}

// FloorMultiple is how many of the floor's rounds a result spends on what it
// is judged by: for a one-client run, the acquire p50 over the floor's round
// p50; for a contended run, a hand-off's time (1 / hand-offs per second)
// over the floor's mean round. 0 when the result is of another scenario or
// there is nothing to divide.
func (f RoundFacts) FloorMultiple(r *Result) float64 {
	if r == nil || r.Unsupported != "" || f.Rounds.P50Ms <= 0 || f.Ceiling <= 0 {
		return 0
	}
	switch {
	case r.Scenario == "uncontended" && r.Clients == 1 && r.Rate == 0:
		return r.Ops["acquire"].P50Ms / f.Rounds.P50Ms
	case r.Scenario == "contended":
		if v, _ := Headline(r); v > 0 {
			return f.Ceiling / v
		}
	}
	return 0
}
