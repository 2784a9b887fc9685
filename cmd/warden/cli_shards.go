package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/client"
)

// Data shards at runtime: shards (the view), shards add, shards retire.

// recentDecisions is how many decisions `warden shards` prints.
const recentDecisions = 10

func printShards(out io.Writer, shards []client.ShardView, log client.ShardLog, logErr error) error {
	w := table(out)
	fmt.Fprintln(w, "SHARD\tSTATE\tLEADER\tRANGES\tREPLICAS (node:role@applied)\tMOVE")
	for _, s := range shards {
		var reps []string
		for _, r := range s.Replicas {
			x := fmt.Sprintf("%d:%s@%d", r.Node, r.Role, r.Applied)
			if r.Error != "" || r.Role == "stopping" {
				x = fmt.Sprintf("%d:%s@?", r.Node, r.Role)
			}
			if r.Leaving {
				x += "(leaving)"
			}
			reps = append(reps, x)
		}
		if len(reps) == 0 {
			reps = append(reps, "-")
		}
		move := "-"
		if s.Move != nil {
			move = fmt.Sprintf("%d→%d %s", s.Move.From, s.Move.To, s.Move.Step)
		}
		leader := "none"
		if s.Leader != 0 {
			leader = strconv.FormatUint(s.Leader, 10)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\n", s.ID, s.State, leader, s.Ranges, strings.Join(reps, " "), move)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return printDecisions(out, log, logErr)
}

// printDecisions prints the policy's reading and the recent decisions.
func printDecisions(out io.Writer, log client.ShardLog, logErr error) error {
	if logErr != nil {
		_, err := fmt.Fprintf(out, "\n(shard decisions unavailable: %v)\n", logErr)
		return err
	}
	if p := log.Policy; p != nil {
		state := "off"
		if p.Enabled {
			state = "on"
		}
		fmt.Fprintf(out, "\npolicy (%s, read %s): %s\n", state, p.At.Format(time.RFC3339), p.Verdict)
	}
	d := log.Decisions
	if len(d) == 0 {
		return nil
	}
	if len(d) > recentDecisions {
		d = d[len(d)-recentDecisions:]
	}
	fmt.Fprintln(out, "\nrecent shard decisions:")
	w := table(out)
	for _, x := range d {
		fmt.Fprintf(w, "  %s\t%s\tshard %d\t%s\n", x.At.Format(time.RFC3339), x.Action, x.Shard, x.Reason)
	}
	return w.Flush()
}

func shardLogCmd() *cobra.Command {
	return &cobra.Command{
		Use: "log", Short: "Show the recorded shard decisions (create, activate, retire, stop) with their reasons, and the policy's last reading",
		Args: cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *client.Client, _ []string) error {
			log, err := c.ShardLog(ctx)
			if err != nil {
				return fail(err)
			}
			if jsonOutput() {
				if log.Decisions == nil {
					log.Decisions = []client.ShardDecision{}
				}
				return printJSON(os.Stdout, log)
			}
			if len(log.Decisions) == 0 && log.Policy == nil {
				_, err := fmt.Fprintln(os.Stdout, "no shard decisions recorded")
				return err
			}
			return printDecisions(os.Stdout, log, nil)
		}),
	}
}

func shardAddCmd() *cobra.Command {
	var nodes []uint
	var noFill bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "add [--nodes 1,2,3]",
		Short: "Create a data shard (a new Raft group) and move ranges into it (admin on / required)",
		Args:  cobra.NoArgs,
		RunE: withConn(func(sctx context.Context, c *client.Client, _ *cobra.Command, _ []string) error {
			ids := make([]uint64, 0, len(nodes))
			for _, n := range nodes {
				if n == 0 {
					return fail(fmt.Errorf("--nodes: node ids are positive integers"))
				}
				ids = append(ids, uint64(n))
			}
			ctx, cancel := opCtx(sctx)
			id, err := c.AddShard(ctx, ids, noFill)
			cancel()
			if err != nil {
				return fail(err)
			}
			if wait <= 0 {
				return report(doneOut{Action: "shard add", Shard: id},
					fmt.Sprintf("shard %d: creation recorded; follow it with `warden shards`", id))
			}
			if err := waitShard(sctx, c, id, wait, "active"); err != nil {
				return fail(err)
			}
			return report(doneOut{Action: "shard add", Shard: id}, fmt.Sprintf("shard %d is active", id))
		}),
	}
	cmd.Flags().UintSliceVar(&nodes, "nodes", nil, "node ids to hold the new shard's replicas (default: the nodes holding the fewest replicas)")
	cmd.Flags().BoolVar(&noFill, "no-fill", false, "leave the new shard empty (move ranges into it with warden range move)")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "wait this long for the shard to be active (0: do not wait)")
	bound(cmd.Flags(), nonNegative, "wait")
	return cmd
}

func shardRetireCmd() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "retire <shard>",
		Short: "Move a data shard's ranges to the other shards, then stop its Raft group and remove its data (admin on / required)",
		Args:  cobra.ExactArgs(1),
		RunE: withConn(func(sctx context.Context, c *client.Client, _ *cobra.Command, args []string) error {
			ids, err := positiveIDs(args)
			if err != nil {
				return err
			}
			ctx, cancel := opCtx(sctx)
			err = c.RetireShard(ctx, ids[0])
			cancel()
			if err != nil {
				return fail(err)
			}
			if wait <= 0 {
				return report(doneOut{Action: "shard retire", Shard: ids[0]},
					fmt.Sprintf("shard %d: retirement recorded; its ranges move out (follow it with `warden shards`)", ids[0]))
			}
			if err := waitShard(sctx, c, ids[0], wait, "retired"); err != nil {
				return fail(err)
			}
			return report(doneOut{Action: "shard retire", Shard: ids[0]}, fmt.Sprintf("shard %d is retired", ids[0]))
		}),
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait this long for the shard to be retired (0: do not wait)")
	bound(cmd.Flags(), nonNegative, "wait")
	return cmd
}

// waitShard polls the shard view until shard id is in state want.
func waitShard(sctx context.Context, c *client.Client, id uint64, wait time.Duration, want string) error {
	deadline := time.Now().Add(wait)
	state := "unknown"
	for {
		ctx, cancel := opCtx(sctx)
		shards, err := c.Shards(ctx)
		cancel()
		if err == nil {
			for _, s := range shards {
				if s.ID == id {
					state = s.State
				}
			}
		}
		if state == want {
			return nil
		}
		if want == "active" && (state == "stopping" || state == "retired") {
			return fmt.Errorf("shard %d was rolled back (%s): see `warden shards` for the reason", id, state)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("shard %d is %s, not %s, after %v (it goes on in the background: follow it with `warden shards`)", id, state, want, wait)
		}
		select {
		case <-sctx.Done():
			return sctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
