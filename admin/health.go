package admin

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/lni/dragonboat/v4"
	"github.com/valyala/fasthttp"

	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/statemachine"
)

// A check is one named health condition, in the Kubernetes convention:
// /readyz?verbose lists "[+]name ok" or "[-]name failed: reason" per check,
// ?exclude=name skips one, /readyz/name runs one.
type check struct {
	name string
	run  func() error
}

// liveChecks: the process answers and its replicas can be read locally.
// Liveness never depends on other nodes (a partitioned node is alive).
func (s *Server) liveChecks() []check {
	return []check{
		{"ping", func() error { return nil }},
		{"serializable_read", s.checkLocalRead},
	}
}

// readyChecks: this node can serve: it knows the range table, every local
// replica knows its leader and has applied what is committed, and its data
// directory takes writes.
func (s *Server) readyChecks() []check {
	return []check{
		{"range_table", s.checkTable},
		{"shard_leaders", s.checkLeaders},
		{"applied", s.checkApplied},
		{"disk_writable", s.checkDisk},
	}
}

// health runs checks (or the one named only) and answers 200 or 503. With
// detail (a caller with the read role) the body is the per-check list and
// its reasons when verbose or failed; without, "ok" or "check failed" only,
// so an unauthenticated probe learns nothing about the node.
func (s *Server) health(ctx *fasthttp.RequestCtx, checks []check, only string, detail bool) {
	args := ctx.QueryArgs()
	excluded := map[string]bool{}
	for _, v := range args.PeekMulti("exclude") {
		excluded[string(v)] = true
	}
	var b strings.Builder
	failed, ran := false, 0
	for _, c := range checks {
		if only != "" && c.name != only {
			continue
		}
		if excluded[c.name] {
			fmt.Fprintf(&b, "[+]%s excluded: ok\n", c.name)
			continue
		}
		ran++
		if err := c.run(); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, err)
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
		}
	}
	if only != "" && ran == 0 {
		ctx.Error("no such check: "+only, fasthttp.StatusNotFound)
		return
	}
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	switch {
	case failed && !detail:
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		ctx.SetBodyString("check failed\n")
	case failed:
		ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		b.WriteString("check failed\n")
		ctx.SetBodyString(b.String())
	case args.Has("verbose") && detail:
		b.WriteString("check passed\n")
		ctx.SetBodyString(b.String())
	default:
		ctx.SetBodyString("ok\n")
	}
}

func (s *Server) checkLocalRead() error {
	nh := s.cfg.Host.NodeHost()
	for _, id := range s.cfg.Host.ShardIDs() {
		if _, err := nh.StaleRead(id, statemachine.StatsQuery{}); err != nil {
			return fmt.Errorf("shard %d: %w", id, err)
		}
	}
	return nil
}

func (s *Server) checkTable() error {
	if s.cfg.Host.Table() == nil {
		return errors.New("the range table is not loaded yet")
	}
	return nil
}

func (s *Server) localShards() []uint64 {
	return append([]uint64{placement.MetaShard}, s.cfg.Host.ShardIDs()...)
}

func (s *Server) checkLeaders() error {
	info := s.cfg.Host.NodeHost().GetNodeHostInfo(dragonboat.NodeHostInfoOption{SkipLogInfo: true})
	leader := map[uint64]uint64{}
	for _, si := range info.ShardInfoList {
		leader[si.ShardID] = si.LeaderID
	}
	var missing []string
	for _, id := range s.localShards() {
		if leader[id] == 0 {
			missing = append(missing, fmt.Sprint(id))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no known leader for shard(s) %s", strings.Join(missing, ","))
	}
	return nil
}

// checkApplied: the local state machine has applied all but MaxApplyLag of
// the entries in this replica's log. (dragonboat does not expose a running
// replica's commit index; its last log entry is at most the in-flight
// proposals past it.)
func (s *Server) checkApplied() error {
	nh := s.cfg.Host.NodeHost()
	var behind []string
	for _, id := range s.cfg.Host.ShardIDs() {
		lr, err := nh.GetLogReader(id)
		if err != nil {
			return fmt.Errorf("shard %d: %w", id, err)
		}
		_, last := lr.GetRange()
		v, err := nh.StaleRead(id, statemachine.StatsQuery{})
		if err != nil {
			return fmt.Errorf("shard %d: %w", id, err)
		}
		applied := v.(statemachine.Stats).Applied
		if last > applied && last-applied > s.cfg.MaxApplyLag {
			behind = append(behind, fmt.Sprintf("shard %d applied %d of %d", id, applied, last))
		}
	}
	if len(behind) > 0 {
		return errors.New(strings.Join(behind, "; "))
	}
	return nil
}

// checkDisk writes, fsyncs and removes a probe file in the data directory.
func (s *Server) checkDisk() error {
	if s.cfg.DataDir == "" {
		return nil
	}
	f, err := os.CreateTemp(s.cfg.DataDir, ".readyz-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	defer os.Remove(name)
	if _, err := f.Write([]byte("warden readyz probe\n")); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Remove(name)
}
