package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/wire"
)

func electCmd() *cobra.Command {
	var (
		ttl, grace time.Duration
		observe    bool
		priority   int64
		owner      string
	)
	cmd := &cobra.Command{
		Use:   "elect <path> [value] [-- command args...]",
		Short: "Campaign for leadership (or --observe the leader)",
		Long: `elect campaigns at <path> with [value] and, once elected, runs the command
(WARDEN_LOCK_TOKEN holds the leadership token) or holds leadership until
interrupted. The command's process group is stopped when the leadership ends
(the session is lost, or an operator hands it over or resigns it), as for
lock. With --observe it prints every leader change. Exit codes as for lock.`,
		Args: cobra.MinimumNArgs(1),
		RunE: withConn(func(ctx context.Context, c *client.Client, cmd *cobra.Command, args []string) error {
			if observe {
				for li := range c.Observe(ctx, args[0]) {
					printLeader(args[0], li)
				}
				return nil
			}
			value := ""
			if len(args) > 1 && cmd.ArgsLenAtDash() != 1 {
				value = args[1]
			}
			s, err := c.NewSession(ctx, client.WithTTL(ttl))
			if err != nil {
				return fail(err)
			}
			defer s.Close(context.Background())
			e := client.NewElection(s, args[0], client.WithPriority(priority), client.WithOwner(owner))
			if err := e.Campaign(ctx, []byte(value)); err != nil {
				return fail(err)
			}
			defer func() {
				rctx, cancel := context.WithTimeout(context.Background(), gf.timeout)
				e.Resign(rctx)
				cancel()
			}()
			dash := cmd.ArgsLenAtDash()
			if dash < 0 || dash >= len(args) {
				if jsonOutput() {
					printJSONLine(os.Stdout, heldOut{Path: args[0], Token: e.Token(), Lease: wire.HexID(s.Lease())})
				} else {
					fmt.Printf("elected at %s token=%d lease=%x (Ctrl-C resigns)\n", args[0], e.Token(), s.Lease())
				}
				return holdUntilInterrupted(ctx, e.Context(), "leadership")
			}
			return runHolding(ctx, e.Context(), args[0], lockEnv(args[0], e.Token(), s.Lease()), args[dash:], grace)
		}),
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "session TTL")
	cmd.Flags().BoolVar(&observe, "observe", false, "print leader changes instead of campaigning")
	cmd.Flags().Int64Var(&priority, "priority", 0, "candidate priority: the highest waiting one wins a free leadership")
	cmd.Flags().StringVar(&owner, "owner", "", "candidate name, the one elect handover names (default random)")
	cmd.Flags().DurationVar(&grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL when the command's process group is stopped")
	bound(cmd.Flags(), positive, "ttl")
	bound(cmd.Flags(), nonNegative, "grace")
	cmd.AddCommand(electHandOverCmd())
	return cmd
}

func printLeader(path string, li client.LeaderInfo) {
	if jsonOutput() {
		printJSONLine(os.Stdout, leaderOut{Path: path, optJSONValue: optValueOf(li.Value), Token: li.Token,
			Lease: wire.HexID(li.Lease), Owner: li.Owner})
		return
	}
	if li.Token == 0 {
		fmt.Printf("%s: no leader\n", path)
		return
	}
	fmt.Printf("%s: leader %q token=%d lease=%x owner=%q\n", path, li.Value, li.Token, li.Lease, li.Owner)
}

func watchCmd() *cobra.Command {
	var (
		prefix   bool
		rev      uint64
		position string
	)
	cmd := &cobra.Command{
		Use:   "watch <path>",
		Short: "Print events on a path (or under it, with --prefix), with their cause",
		Long: `Print events on a path (or under it, with --prefix), with their cause.

A prefix watch follows its subtree on every shard. Each event line ends with
the watch's position (a revision per shard, "shard:rev,..."; "position" in
-o json): give it to --position to resume after that event, losing and
repeating nothing while the shards retain the history.`,
		Args: cobra.ExactArgs(1),
		RunE: withConn(func(ctx context.Context, c *client.Client, cmd *cobra.Command, args []string) error {
			opts, err := watchOptions(prefix, rev, position)
			if err != nil {
				return err
			}
			for wr := range c.Watch(ctx, args[0], opts...) {
				if wr.Err != nil {
					return fail(wr.Err)
				}
				printEvents(wr, prefix)
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&prefix, "prefix", false, "watch the whole subtree")
	cmd.Flags().Uint64Var(&rev, "rev", 0, "start from this revision of the path's shard (0 = from now)")
	cmd.Flags().StringVar(&position, "position", "", "with --prefix: resume after this position (shard:rev,... as printed)")
	return cmd
}

// watchOptions checks watch's flags: a position is a prefix watch's, and
// it says where to start, as --rev does.
func watchOptions(prefix bool, rev uint64, position string) ([]client.OpOption, error) {
	usage := func(err error) error { return &exitError{code: exitFailure, err: err} }
	opts := []client.OpOption{client.WithRev(rev)}
	if prefix {
		opts = append(opts, client.WithPrefix())
	}
	if position == "" {
		return opts, nil
	}
	if !prefix {
		return nil, usage(fmt.Errorf("--position needs --prefix (a single path resumes with --rev)"))
	}
	if rev != 0 {
		return nil, usage(fmt.Errorf("--position and --rev both say where to start: give one"))
	}
	p, err := client.ParsePosition(position)
	if err != nil {
		return nil, usage(fmt.Errorf("--position %s: %w", position, err))
	}
	return append(opts, client.WithWatchPosition(p)), nil
}

// printEvents prints a batch, each event of a prefix watch with the
// position after it.
func printEvents(wr client.WatchResponse, prefix bool) {
	for i, ev := range wr.Events {
		pos := ""
		if prefix {
			pos = wr.PositionAfter(i).String()
		}
		if jsonOutput() {
			printJSONLine(os.Stdout, watchEventOut{eventOut: eventOf(ev), Position: pos})
			continue
		}
		line := fmt.Sprintf("rev=%d shard=%d %s %s cause=%s token=%d lease=%x owner=%q value=%q",
			ev.Rev, ev.Shard, ev.Kind, ev.Path, ev.Cause, ev.Token, ev.Lease, ev.Owner, ev.Value)
		if pos != "" {
			line += " position=" + pos
		}
		fmt.Println(line)
	}
}

func kvCmd() *cobra.Command {
	kv := &cobra.Command{Use: "kv", Short: "Read and write the key-value store"}
	put := kvPutCmd()
	get := &cobra.Command{
		Use: "get <key>", Short: "Read a value", Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			kv, err := c.Get(ctx, args[0])
			if err != nil {
				return fail(err)
			}
			if jsonOutput() {
				return printJSON(os.Stdout, kvOf(kv))
			}
			fmt.Println(string(kv.Value))
			return nil
		}),
	}
	del := &cobra.Command{
		Use: "del <key>", Short: "Delete a key", Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			if err := c.Delete(ctx, args[0]); err != nil {
				return fail(err)
			}
			if jsonOutput() {
				return printJSON(os.Stdout, deletedOut{Key: args[0], Deleted: true})
			}
			return nil
		}),
	}
	ls := &cobra.Command{
		Use: "ls <prefix>", Short: "List keys under a prefix", Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			kvs, err := c.List(ctx, args[0])
			if err != nil {
				return fail(err)
			}
			if jsonOutput() {
				out := make([]kvOut, 0, len(kvs))
				for _, kv := range kvs {
					out = append(out, kvOf(kv))
				}
				return printJSON(os.Stdout, out)
			}
			w := table(os.Stdout)
			fmt.Fprintln(w, "KEY\tVERSION\tLEASE\tVALUE")
			for _, kv := range kvs {
				fmt.Fprintf(w, "%s\t%d\t%s\t%q\n", kv.Key, kv.Version, leaseStr(kv.Lease), kv.Value)
			}
			return w.Flush()
		}),
	}
	kv.AddCommand(put, get, del, ls)
	return kv
}

// leaseStr is a lease id in a table: hex, "-" for none.
func leaseStr(l uint64) string {
	if l == 0 {
		return "-"
	}
	return wire.HexID(l).String()
}

// withConn runs a verb with a client, under a context that Ctrl-C cancels.
func withConn(f func(ctx context.Context, c *client.Client, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx, stop := signalContext()
		defer stop()
		c, err := connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		return f(ctx, c, cmd, args)
	}
}

// withClient runs a one-shot verb: withConn plus the per-request timeout.
func withClient(f func(ctx context.Context, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return withConn(func(sctx context.Context, c *client.Client, _ *cobra.Command, args []string) error {
		ctx, cancel := opCtx(sctx)
		defer cancel()
		return f(ctx, c, args)
	})
}

func locksCmd() *cobra.Command {
	locks := &cobra.Command{Use: "locks", Short: "Inspect locks"}
	ls := &cobra.Command{
		Use: "ls [prefix]", Short: "List held locks under a prefix: holder, mode, token, TTL left, waiters",
		Args: cobra.MaximumNArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			prefix := "/"
			if len(args) == 1 {
				prefix = args[0]
			}
			holders, err := c.ListLocks(ctx, prefix)
			if err != nil {
				return fail(err)
			}
			rows := []lockRowOut{}
			waiters := map[string]int{}
			for _, h := range holders {
				if _, seen := waiters[h.Path]; !seen && len(holders) <= 200 {
					if info, err := c.LockInfo(ctx, h.Path); err == nil {
						waiters[h.Path] = len(info.Waiters)
					}
				}
				rows = append(rows, lockRowOut{holderOf(h), waiters[h.Path]})
			}
			if jsonOutput() {
				return printJSON(os.Stdout, rows)
			}
			w := table(os.Stdout)
			fmt.Fprintln(w, "PATH\tMODE\tTOKEN\tLEASE\tOWNER\tHOLDS\tTTL LEFT\tWAITERS")
			for _, r := range rows {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%d\n", r.Path, r.Mode, r.Token, leaseStr(uint64(r.Lease)), r.Owner, r.Holds,
					ms(r.TTLLeftMs), r.Waiters)
			}
			return w.Flush()
		}),
	}
	locks.AddCommand(ls, locksInfoCmd(), locksRevokeCmd())
	return locks
}

func statusCmd() *cobra.Command {
	return &cobra.Command{
		Use: "status", Short: "Show nodes, shards and their leaders",
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			raw, err := c.Status(ctx)
			if err != nil {
				return fail(err)
			}
			if jsonOutput() { // the server's document, which follows the CLI's rules
				var b bytes.Buffer
				if err := json.Indent(&b, raw, "", "  "); err != nil {
					return err
				}
				b.WriteByte('\n')
				_, err := b.WriteTo(os.Stdout)
				return err
			}
			var st router.Status
			if err := json.Unmarshal(raw, &st); err != nil {
				return err
			}
			w := table(os.Stdout)
			fmt.Fprintf(w, "answered by node %d (version %s), table generation %d, %d ranges\n\n", st.Node, st.Version, st.TableGen, st.Ranges)
			fmt.Fprintln(w, "NODE\tSTATE\tLAST HEARD\tCPU\tCLIENT\tRAFT\tVERSION")
			now := time.Now()
			for _, n := range st.Nodes {
				cpu := "-"
				if r := n.CPU; r != nil && r.Capacity > 0 {
					cpu = fmt.Sprintf("%.0f%% of %.3g", 100*r.Share(), r.Capacity)
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.State, router.HeardAgo(n.LastHeard, now), cpu, n.ClientAddr, n.RaftAddr, dash(n.Version))
			}
			fmt.Fprintln(w, "\nSHARD\tLEADER\tREPLICAS\tRANGES\tAPPLIED\tWATCHERS")
			for _, s := range st.Shards {
				leader := "none"
				if s.Leader != 0 {
					leader = strconv.FormatUint(s.Leader, 10)
				}
				fmt.Fprintf(w, "%d\t%s\t%v\t%d\t%d\t%d\n", s.ID, leader, s.Replicas, s.Ranges, s.Applied, s.Watchers)
			}
			return w.Flush()
		}),
	}
}
