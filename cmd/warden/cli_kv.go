package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/wire"
)

// kvPutCmd is `warden kv put`: a plain or compare-and-set write, or, with
// --ephemeral, a key that lives only as long as this process keeps its
// session alive (a service registration, etcd's put --lease with a
// keep-alive, ZooKeeper's ephemeral node).
func kvPutCmd() *cobra.Command {
	var (
		expect     int64
		ephemeral  bool
		ttl, grace time.Duration
	)
	cmd := &cobra.Command{
		Use:   "put <key> <value> [-- command args...]",
		Short: "Write a value (--expect-version for compare-and-set, --ephemeral for a key that lives while warden runs)",
		Long: `put writes <value> at <key> and prints its new version.

--expect-version N writes only if the key is at version N (0: only if it
does not exist); otherwise it fails with "version mismatch" (exit 1).

--ephemeral writes the key under a session of its own (--ttl) and keeps the
session alive: without a command until interrupted (Ctrl-C deletes the key,
exit 0), with a command while it runs (WARDEN_KV_KEY, WARDEN_KV_VERSION and
WARDEN_KV_LEASE, the lease id in hex, are in its environment; the key is
deleted when it exits, and warden exits with its code). If the session is
lost, the service deletes the key, the command's process group is stopped as
for lock, and warden exits 3. Another client may still overwrite or delete
the key meanwhile; the session only bounds how long it can outlive this
process.`,
		Args: func(cmd *cobra.Command, args []string) error {
			n := len(args)
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				n = dash
				if !ephemeral {
					return fmt.Errorf("a command after -- needs --ephemeral")
				}
				if dash == len(args) {
					return fmt.Errorf("no command after --")
				}
			}
			if n != 2 {
				return fmt.Errorf("put takes <key> <value>, got %d argument(s) before the command", n)
			}
			return nil
		},
		RunE: withConn(func(ctx context.Context, c *client.Client, cmd *cobra.Command, args []string) error {
			if !ephemeral {
				for _, name := range []string{"ttl", "grace"} {
					if cmd.Flags().Changed(name) {
						return &exitError{code: exitFailure, err: fmt.Errorf("--%s needs --ephemeral", name)}
					}
				}
				opCtx, cancel := opCtx(ctx)
				defer cancel()
				ver, err := kvPut(opCtx, c, args[0], args[1], expect)
				if err != nil {
					return fail(err)
				}
				printPut(putOut{Key: args[0], Version: ver}, "")
				return nil
			}
			s, err := c.NewSession(ctx, client.WithTTL(ttl))
			if err != nil {
				return fail(err)
			}
			defer s.Close(context.Background()) // revokes the lease: the service deletes the key
			opCtx, cancel := opCtx(ctx)
			ver, err := kvPut(opCtx, c, args[0], args[1], expect, client.WithLease(s))
			cancel()
			if err != nil {
				return fail(err)
			}
			out := putOut{Key: args[0], Version: ver, Lease: wire.HexID(s.Lease())}
			dash := cmd.ArgsLenAtDash()
			if dash < 0 {
				printPut(out, " (Ctrl-C deletes)")
				return holdUntilInterrupted(ctx, s.Context(), "session (and "+args[0]+")")
			}
			env := []string{
				"WARDEN_KV_KEY=" + args[0],
				"WARDEN_KV_VERSION=" + strconv.FormatUint(ver, 10),
				"WARDEN_KV_LEASE=" + strconv.FormatUint(s.Lease(), 16),
			}
			return runHolding(ctx, s.Context(), args[0], env, args[dash:], grace)
		}),
	}
	f := cmd.Flags()
	f.Int64Var(&expect, "expect-version", -1, "only write if the key is at this version (0 = must not exist)")
	f.BoolVar(&ephemeral, "ephemeral", false, "keep the key only while warden (or the command after --) runs")
	f.DurationVar(&ttl, "ttl", 10*time.Second, "with --ephemeral: session TTL (the key is deleted this long after the last acknowledged keepalive)")
	f.DurationVar(&grace, "grace", 2*time.Second, "with --ephemeral: time between SIGTERM and SIGKILL when the command's process group is stopped")
	bound(f, minusOne, "expect-version")
	bound(f, positive, "ttl")
	bound(f, nonNegative, "grace")
	return cmd
}

// kvPut writes key, compare-and-set when expect is 0 or more.
func kvPut(ctx context.Context, c *client.Client, key, value string, expect int64, opts ...client.OpOption) (uint64, error) {
	if expect >= 0 {
		return c.CAS(ctx, key, uint64(expect), []byte(value), opts...)
	}
	return c.Put(ctx, key, []byte(value), opts...)
}

// printPut prints a write's answer; an ephemeral key's is one JSON line, as
// every held thing's is.
func printPut(out putOut, note string) {
	if jsonOutput() && out.Lease != 0 {
		printJSONLine(os.Stdout, out)
		return
	}
	if jsonOutput() {
		printJSON(os.Stdout, out)
		return
	}
	if out.Lease != 0 {
		fmt.Printf("version=%d lease=%s%s\n", out.Version, out.Lease, note)
		return
	}
	fmt.Printf("version=%d\n", out.Version)
}
