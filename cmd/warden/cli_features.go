package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/wire"
)

// Verbs for semaphores, multi-locks, revocation, lock introspection and
// election hand-over.

func semCmd() *cobra.Command {
	var ttl, grace time.Duration
	cmd := &cobra.Command{
		Use:   "sem <path> <permits> [-- command args...]",
		Short: "Hold one permit of a counting semaphore while a command runs",
		Long: `sem takes one of <permits> permits on <path> (FIFO) and runs the command
with WARDEN_LOCK_TOKEN set to the permit's fencing token, or holds the permit
until interrupted. The command's process group is stopped when the permit
ends, as for lock. Exit codes as for lock.`,
		Args: cobra.MinimumNArgs(2),
		RunE: withConn(func(ctx context.Context, c *client.Client, cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 {
				return &exitError{code: exitFailure, err: fmt.Errorf("permits must be a positive number, not %q", args[1])}
			}
			s, err := c.NewSession(ctx, client.WithTTL(ttl))
			if err != nil {
				return fail(err)
			}
			defer s.Close(context.Background())
			p, err := client.NewSemaphore(s, args[0], n).Acquire(ctx)
			if err != nil {
				return fail(err)
			}
			defer func() {
				rctx, cancel := context.WithTimeout(context.Background(), gf.timeout)
				p.Release(rctx)
				cancel()
			}()
			return holdWhile(ctx, p.Context(), s, cmd, args, 2, heldOut{Path: args[0], Token: p.Token()}, grace)
		}),
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "session TTL")
	cmd.Flags().DurationVar(&grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL when the command's process group is stopped")
	bound(cmd.Flags(), positive, "ttl")
	bound(cmd.Flags(), nonNegative, "grace")
	return cmd
}

func lockAllCmd() *cobra.Command {
	var (
		ttl, grace time.Duration
		try        bool
	)
	cmd := &cobra.Command{
		Use:   "lock-all <path>... [-- command args...]",
		Short: "Hold several locks, all or nothing, while a command runs",
		Long: `lock-all takes every path (in the cluster's global order, atomically per
shard; never deadlocking with other lock-all callers) and runs the command with
WARDEN_LOCK_TOKENS set to "path=token,..." or holds them until interrupted.
The command's process group is stopped when any of the holds ends, as for
lock. Exit codes as for lock.`,
		Args: cobra.MinimumNArgs(1),
		RunE: withConn(func(ctx context.Context, c *client.Client, cmd *cobra.Command, args []string) error {
			paths := args
			if d := cmd.ArgsLenAtDash(); d >= 0 {
				paths = args[:d]
			}
			s, err := c.NewSession(ctx, client.WithTTL(ttl))
			if err != nil {
				return fail(err)
			}
			defer s.Close(context.Background())
			var opts []client.LockOption
			if try {
				opts = append(opts, client.WithTry())
			}
			m, err := client.LockAll(ctx, s, paths, opts...)
			if err != nil {
				return fail(err)
			}
			defer func() {
				rctx, cancel := context.WithTimeout(context.Background(), gf.timeout)
				m.Unlock(rctx)
				cancel()
			}()
			var pairs []string
			var held heldOut
			for _, p := range m.Paths() {
				pairs = append(pairs, fmt.Sprintf("%s=%d", p, m.Tokens()[p]))
				held.Locks = append(held.Locks, heldLock{Path: p, Token: m.Tokens()[p]})
			}
			os.Setenv("WARDEN_LOCK_TOKENS", strings.Join(pairs, ","))
			return holdWhile(ctx, m.Context(), s, cmd, args, len(paths), held, grace)
		}),
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Second, "session TTL")
	cmd.Flags().DurationVar(&grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL when the command's process group is stopped")
	cmd.Flags().BoolVar(&try, "try", false, "fail at once (exit 2) if any path is held")
	bound(cmd.Flags(), positive, "ttl")
	bound(cmd.Flags(), nonNegative, "grace")
	return cmd
}

// holdWhile runs the command after the dash (args[first:] when there is
// one) while the hold whose context is held lives, or waits for an
// interrupt.
func holdWhile(ctx, held context.Context, s *client.Session, cmd *cobra.Command, args []string, first int, what heldOut, grace time.Duration) error {
	what.Lease = wire.HexID(s.Lease())
	path := what.Path
	for i, l := range what.Locks {
		if i > 0 {
			path += ","
		}
		path += l.Path
	}
	dash := cmd.ArgsLenAtDash()
	if dash < 0 || dash >= len(args) || dash < first {
		printHeld("holding", what)
		return holdUntilInterrupted(ctx, held, "hold")
	}
	return runHolding(ctx, held, path, lockEnv(path, what.Token, s.Lease()), args[dash:], grace)
}

func locksInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use: "info <path>", Short: "Show a lock's holders, waiters, semaphore permits, lock-delay and pending revocation",
		Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			info, err := c.LockInfo(ctx, args[0])
			if err != nil {
				return fail(err)
			}
			if jsonOutput() {
				return printJSON(os.Stdout, lockInfoOf(info))
			}
			fmt.Printf("path %s", info.Path)
			if info.Permits > 0 {
				fmt.Printf("  semaphore of %d permits", info.Permits)
			}
			if !info.DelayUntil.IsZero() {
				fmt.Printf("  lock-delay until %s", info.DelayUntil.UTC().Format(time.RFC3339Nano))
			}
			if !info.RevokeAt.IsZero() {
				fmt.Printf("  revocation due %s", info.RevokeAt.UTC().Format(time.RFC3339Nano))
			}
			fmt.Println()
			w := table(os.Stdout)
			fmt.Fprintln(w, "ROLE\tMODE\tTOKEN\tLEASE\tOWNER")
			for _, h := range info.Holders {
				fmt.Fprintf(w, "holder\t%s\t%d\t%s\t%s\n", h.Mode, h.Token, leaseStr(h.Lease), h.Owner)
			}
			for _, q := range info.Waiters {
				fmt.Fprintf(w, "waiter\t%s\t-\t%s\t%s\n", q.Mode, leaseStr(q.Lease), q.Owner)
			}
			return w.Flush()
		}),
	}
}

func locksRevokeCmd() *cobra.Command {
	var (
		token uint64
		grace time.Duration
		force bool
	)
	cmd := &cobra.Command{
		Use:   "revoke <path>",
		Short: "Ask a lock's holder to release within --grace; revoke it at the deadline",
		Long: `revoke asks the holder of <path> (--token, default every holder) to release
within --grace. The holder's client is notified; if it still holds the lock at
the deadline the service revokes it, starts its lock-delay and raises the
fence. Without --force (which needs the admin permission) only locks taken as
revocable can be revoked.`,
		Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			var err error
			if force {
				err = c.ForceRevokeLock(ctx, args[0], token, grace)
			} else {
				err = c.RevokeLock(ctx, args[0], token, grace)
			}
			if err != nil {
				return fail(err)
			}
			return report(doneOut{Action: "revoke", Path: args[0], Token: token, GraceMs: grace.Milliseconds()},
				fmt.Sprintf("revocation of %s requested (grace %v)", args[0], grace))
		}),
	}
	f := cmd.Flags()
	f.Uint64Var(&token, "token", 0, "the holder's token (0: every holder)")
	f.DurationVar(&grace, "grace", 5*time.Second, "time the holder has to release (0: revoke now)")
	f.BoolVar(&force, "force", false, "admin revocation: works on any lock")
	bound(f, nonNegative, "grace")
	return cmd
}

func electHandOverCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "handover <path> <successor-owner>",
		Short: "Hand leadership of an election to a waiting candidate, with no gap",
		Args:  cobra.ExactArgs(2),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			li, err := c.Leader(ctx, args[0])
			if err != nil {
				return fail(err)
			}
			resp, err := c.Do(ctx, wireHandOver{path: args[0], token: li.Token, target: args[1]}.request())
			if err != nil {
				return fail(err)
			}
			return report(doneOut{Action: "handover", Path: args[0], Owner: resp.Owner, Token: resp.Token},
				fmt.Sprintf("%s: %s leads now, token=%d", args[0], resp.Owner, resp.Token))
		}),
	}
}

type wireHandOver struct {
	path, target string
	token        uint64
}

func (h wireHandOver) request() *wire.Request {
	return &wire.Request{Op: wire.OpHandOver, Path: h.path, Token: h.token, Target: h.target}
}

// printHeld tells what is held while no command runs under it.
func printHeld(verb string, h heldOut) {
	if jsonOutput() {
		printJSONLine(os.Stdout, h)
		return
	}
	if len(h.Locks) > 0 {
		var pairs []string
		for _, l := range h.Locks {
			pairs = append(pairs, fmt.Sprintf("%s token=%d", l.Path, l.Token))
		}
		fmt.Printf("%s %s lease=%s (Ctrl-C releases)\n", verb, strings.Join(pairs, ", "), h.Lease)
		return
	}
	fmt.Printf("%s %s token=%d lease=%s (Ctrl-C releases)\n", verb, h.Path, h.Token, h.Lease)
}
