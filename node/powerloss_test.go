package node_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/internal/diskfs"
	"github.com/wardenlock/warden/internal/diskfs/crashfs"
	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
)

// TestPowerLossOfANodeKeepsTheClusterLinearizable: register clients lock,
// release, read and keep alive through every node of a 3-node cluster
// (snapshots every 30 entries) while, one after another, nodes lose power.
// A node's Raft log store and audit store run on crashfs; at the power
// loss the file system is frozen (the node can no longer make anything
// durable, so it can no longer acknowledge anything that needs it), the
// node is abandoned as it is, and a new instance starts on the image of
// what had been synced (or torn, or cut short), with the same Raft
// identity behind a relay. The history must be linearizable, tokens must
// never go back, and locks taken before every power loss keep their
// tokens.
//
// What is on crashfs: the Raft log store (every segment, spare and
// directory under wardenwal) and the audit store. What is not: dragonboat's
// NodeHost files (its ID, address and settings records, and the snapshot
// files a replica saves) and the shard manifest, which are copied as they
// are at the power loss, like after a process kill.
func TestPowerLossOfANodeKeepsTheClusterLinearizable(t *testing.T) {
	const nodes = 3
	disks := make([]*crashfs.FS, nodes)
	relays := make([]*relay, nodes)  // Raft: each node's identity address
	fronts := make([]*relay, nodes)  // clients: what the register dials
	rebased := make([]string, nodes) // the data dir the crashfs paths name
	c := nodetest.Start(t, nodetest.Options{Nodes: nodes, Shards: 2, Edit: func(cfg *node.Config) {
		i := int(cfg.ID - 1)
		disks[i] = crashfs.New()
		// The data dir exists and is durable before the node starts.
		if err := disks[i].MkdirAllSynced(cfg.DataDir); err != nil {
			t.Fatal(err)
		}
		rebased[i] = cfg.DataDir
		cfg.LogFS = onDisk{disks[i], cfg.DataDir, cfg.DataDir}
		cfg.Audit.FS, cfg.Audit.Dir = disks[i].VFS(), filepath.Join(cfg.DataDir, "audit")
		cfg.SnapshotEntries = 30
		cfg.RaftListen = nodetest.FreePorts(t, 1)[0]
		relays[i] = newRelay(t, cfg.RaftAddr, cfg.RaftListen)
		fronts[i] = newRelay(t, "127.0.0.1:0", cfg.ClientAddr)
	}})
	var zombies []*node.Node
	var frozen []*crashfs.FS
	t.Cleanup(func() {
		// The others first: a zombie let go must have nobody to talk to.
		c.StopAll()
		for i, z := range zombies {
			frozen[i].Thaw()
			z.Close()
		}
		for i := range relays {
			relays[i].close()
			fronts[i].close()
		}
	})
	ctx := ctxT(t, 5*time.Minute)
	// Every client dials the fronts, which follow a node to its new
	// instance.
	var endpoints []string
	for _, f := range fronts {
		endpoints = append(endpoints, f.addr())
	}
	admin, err := client.New(ctx, endpoints, client.WithRequestTimeout(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	kept := holdLocks(t, ctx, admin, 6)

	reg := startRegister(t, ctx, endpoints, 11)

	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	shards := c.ShardIDs()
	for round, mode := range []crashfs.Mode{crashfs.Synced, crashfs.Torn, crashfs.Cut} {
		time.Sleep(time.Duration(500+rng.Intn(1500)) * time.Millisecond)
		// A shard's leader: its log has entries it wrote but not yet synced.
		k := c.LeaderOf(shards[round%len(shards)])
		if k < 0 {
			k = rng.Intn(nodes)
		}

		// Power loss: nothing the node does from now on is durable, and it
		// blocks at its next change, so it acknowledges nothing that needs one.
		st := disks[k].Freeze()
		zombies, frozen = append(zombies, c.Nodes[k]), append(frozen, disks[k])
		c.Nodes[k] = nil
		img := st.Image(mode, rng)

		// The new instance: the same identity (relays), new ports, a copy of
		// the files off crashfs, the image for the stores.
		cfg := c.Cfgs[k]
		dir := t.TempDir()
		copyTree(t, cfg.DataDir, dir)
		cfg.DataDir = dir
		cfg.LogFS = onDisk{img, dir, rebased[k]}
		cfg.Audit.FS = img.VFS()
		ports := nodetest.FreePorts(t, 2)
		cfg.RaftListen, cfg.ClientAddr = ports[0], ports[1]
		c.Cfgs[k] = cfg
		disks[k] = img
		relays[k].retarget(cfg.RaftListen)
		fronts[k].retarget(cfg.ClientAddr)
		c.StartNode(k)
		files, dirs := st.Unsynced()
		t.Logf("node %d lost power (%v image of %d unsynced file changes, %d directory changes) and restarted", k+1, mode, files, dirs)
		c.WaitReady(time.Minute)
		waitCaughtUp(t, ctx, admin, uint64(k+1))
		// The cluster serves again.
		before, _ := reg.w.Stats()
		c.WaitFor(time.Minute, "register operations after the restart", func() error {
			if ops, _ := reg.w.Stats(); ops < before+50 {
				return fmt.Errorf("%d operations since the restart", ops-before)
			}
			return nil
		})
	}
	reg.stop()
	// Reads may time out while a restarted node settles its leaderships;
	// they are retried.
	keptLocksHold(t, ctx, admin, kept)
	ops, unknown := reg.check(t, ctx, admin)
	keptLocksAdvance(t, ctx, admin, kept)
	t.Logf("%d register operations (%d unknown outcome) linearizable across 3 power losses (seed %d)", ops, unknown, seed)
}

// waitCaughtUp waits until every replica on node id has applied as far as
// its shard's leader had when the wait began.
func waitCaughtUp(t *testing.T, ctx context.Context, cl *client.Client, id uint64) {
	t.Helper()
	target := map[uint64]uint64{}
	nodetest.WaitFor(t, time.Minute, fmt.Sprintf("node %d to catch up", id), func() error {
		shards, err := cl.Shards(ctx)
		if err != nil {
			return err
		}
		for _, s := range shards {
			var mine, leader uint64
			for _, r := range s.Replicas {
				if r.Node == id {
					mine = r.Applied
				}
				if r.Node == s.Leader {
					leader = r.Applied
				}
			}
			if _, ok := target[s.ID]; !ok {
				if leader == 0 {
					return fmt.Errorf("shard %d: no leader", s.ID)
				}
				target[s.ID] = leader
			}
			if mine < target[s.ID] {
				return fmt.Errorf("shard %d: node %d applied %d of %d", s.ID, id, mine, target[s.ID])
			}
		}
		return nil
	})
}

// onDisk is a node's crashfs as its Raft log store sees it: paths under
// the node's data dir name the files crashfs holds under base (the data
// dir the node first ran with), and the directories dragonboat makes on
// the disk above the store's own exist and are durable.
type onDisk struct {
	fs        *crashfs.FS
	dir, base string
}

func (d onDisk) path(name string) string {
	if rest, ok := strings.CutPrefix(name, d.dir); ok {
		return d.base + rest
	}
	return name
}

func (d onDisk) Create(name string, perm os.FileMode) (diskfs.File, error) {
	return d.fs.Create(d.path(name), perm)
}
func (d onDisk) Open(name string) (diskfs.File, error) { return d.fs.Open(d.path(name)) }
func (d onDisk) Remove(name string) error              { return d.fs.Remove(d.path(name)) }
func (d onDisk) Rename(oldname, newname string) error {
	return d.fs.Rename(d.path(oldname), d.path(newname))
}
func (d onDisk) List(dir string) ([]string, error) { return d.fs.List(d.path(dir)) }
func (d onDisk) SyncDir(dir string) error          { return d.fs.SyncDir(d.path(dir)) }
func (d onDisk) MkdirAll(dir string, perm os.FileMode) error {
	if err := d.fs.MkdirAllSynced(filepath.Dir(d.path(dir))); err != nil {
		return err
	}
	return d.fs.MkdirAll(d.path(dir), perm)
}

// copyTree copies the files of src (on the disk) into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed while the walk ran
			}
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if de.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !de.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// relay forwards the TCP connections it accepts to a target it can be
// pointed at anew (which drops the connections it carries).
type relay struct {
	ln     net.Listener
	target atomic.Pointer[string]
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newRelay(t *testing.T, addr, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, conns: map[net.Conn]struct{}{}}
	r.target.Store(&target)
	r.wg.Add(1)
	go r.accept()
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) retarget(target string) {
	r.target.Store(&target)
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
	}
}

func (r *relay) close() {
	r.ln.Close()
	r.retarget("")
	r.wg.Wait()
}

func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.serve(in)
		}()
	}
}

func (r *relay) serve(in net.Conn) {
	if !r.track(in) {
		in.Close()
		return
	}
	defer r.untrack(in)
	out, err := net.DialTimeout("tcp", *r.target.Load(), time.Second)
	if err != nil {
		return
	}
	if !r.track(out) {
		out.Close()
		return
	}
	defer r.untrack(out)
	done := make(chan struct{}, 2)
	go func() { io.Copy(out, in); done <- struct{}{} }()
	go func() { io.Copy(in, out); done <- struct{}{} }()
	<-done
}
