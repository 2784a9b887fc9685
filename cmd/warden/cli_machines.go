package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/client"
)

// Machines: node add|drain|remove, replica move, shards, shards transfer.

func nodeCmd() *cobra.Command {
	nc := &cobra.Command{Use: "node", Short: "Add, drain and remove cluster nodes"}
	admin := func(use, short string, f func(*client.Client, context.Context, uint64) error, done string) *cobra.Command {
		return &cobra.Command{
			Use: use + " <node-id>", Short: short, Args: cobra.ExactArgs(1),
			RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
				id, err := strconv.ParseUint(args[0], 10, 64)
				if err != nil || id == 0 {
					return fail(fmt.Errorf("node id %q: want a positive integer", args[0]))
				}
				if err := f(c, ctx, id); err != nil {
					return fail(err)
				}
				return report(doneOut{Action: "node " + use, Node: id}, fmt.Sprintf(done, id))
			}),
		}
	}
	nc.AddCommand(
		admin("add", "Mark a registered node active: it receives replicas and leaderships again (a new node joins with `warden serve --join`)",
			(*client.Client).NodeActivate, "node %d is active"),
		admin("drain", "Move every replica and shard leadership off a node (progress: warden shards)",
			(*client.Client).NodeDrain, "node %d is draining; follow the moves with `warden shards`"),
		admin("remove", "Take a drained node out of the cluster and the meta group, then stop its process",
			(*client.Client).NodeRemove, "node %d removed; stop its process"),
	)
	return nc
}

func replicaCmd() *cobra.Command {
	rc := &cobra.Command{Use: "replica", Short: "Move shard replicas between nodes"}
	var abort bool
	move := &cobra.Command{
		Use:   "move <shard> <from-node> <to-node> | move <shard> --abort",
		Short: "Move a shard's replica: non-voting on the target, caught up, voter, then the source removed",
		Args:  cobra.RangeArgs(1, 3),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			ids, err := positiveIDs(args)
			if err != nil {
				return err
			}
			if abort {
				if err := c.AbortReplicaMove(ctx, ids[0]); err != nil {
					return fail(err)
				}
				return report(doneOut{Action: "replica move abort", Shard: ids[0]}, fmt.Sprintf("shard %d: move rolling back", ids[0]))
			}
			if len(ids) != 3 {
				return fail(fmt.Errorf("want <shard> <from-node> <to-node>"))
			}
			if err := c.MoveReplica(ctx, ids[0], ids[1], ids[2]); err != nil {
				return fail(err)
			}
			return report(doneOut{Action: "replica move", Shard: ids[0], From: ids[1], To: ids[2]},
				fmt.Sprintf("shard %d: moving the replica on node %d to node %d; follow it with `warden shards`", ids[0], ids[1], ids[2]))
		}),
	}
	move.Flags().BoolVar(&abort, "abort", false, "roll back the shard's move (only before the target votes)")
	rc.AddCommand(move)
	return rc
}

func shardsCmd() *cobra.Command {
	sc := &cobra.Command{
		Use: "shards", Short: "Show every shard's state, replicas (role, applied index), leader and any replica move, and the recent shard decisions",
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			shards, err := c.Shards(ctx)
			if err != nil {
				return fail(err)
			}
			if jsonOutput() {
				return printJSON(os.Stdout, shards) // decisions: warden shards log
			}
			log, logErr := c.ShardLog(ctx)
			return printShards(os.Stdout, shards, log, logErr)
		}),
	}
	sc.AddCommand(transferCmd(), shardAddCmd(), shardRetireCmd(), shardLogCmd()) // cli_shards.go
	return sc
}

func transferCmd() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "transfer <shard> <node>",
		Short: "Hand a shard's leadership to its replica on a node (admin on / required)",
		Args:  cobra.ExactArgs(2),
		RunE: withConn(func(sctx context.Context, c *client.Client, _ *cobra.Command, args []string) error {
			ids, err := positiveIDs(args)
			if err != nil {
				return err
			}
			shard, node := ids[0], ids[1]
			ctx, cancel := opCtx(sctx)
			err = c.TransferLeader(ctx, shard, node)
			cancel()
			if err != nil {
				return fail(err)
			}
			if wait <= 0 {
				return report(doneOut{Action: "shard transfer", Shard: shard, Node: node},
					fmt.Sprintf("shard %d: leadership transfer to node %d started; follow it with `warden shards`", shard, node))
			}
			deadline := time.Now().Add(wait)
			var leader uint64
			for {
				ctx, cancel := opCtx(sctx)
				shards, err := c.Shards(ctx)
				cancel()
				if err == nil {
					for _, s := range shards {
						if s.ID == shard {
							leader = s.Leader
						}
					}
				}
				if leader == node {
					return report(doneOut{Action: "shard transfer", Shard: shard, Node: node, Leader: leader},
						fmt.Sprintf("shard %d: node %d leads it", shard, node))
				}
				if time.Now().After(deadline) {
					return fail(fmt.Errorf("shard %d: transfer to node %d started, but node %d still leads it after %v (a lagging target, or an election, can defeat a transfer: try again)", shard, node, leader, wait))
				}
				select {
				case <-sctx.Done():
					return fail(sctx.Err())
				case <-time.After(200 * time.Millisecond):
				}
			}
		}),
	}
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Second, "wait this long for the node to lead the shard (0: do not wait)")
	bound(cmd.Flags(), nonNegative, "wait")
	return cmd
}

// positiveIDs parses shard and node ids given on the command line.
func positiveIDs(args []string) ([]uint64, error) {
	ids := make([]uint64, 0, len(args))
	for _, a := range args {
		v, err := strconv.ParseUint(a, 10, 64)
		if err != nil || v == 0 {
			return nil, fail(fmt.Errorf("%q: want a positive integer", a))
		}
		ids = append(ids, v)
	}
	return ids, nil
}
