package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/wire"
)

func lockCmd() *cobra.Command {
	var (
		ttl    time.Duration
		wait   time.Duration
		try    bool
		shared bool
		owner  string
		grace  time.Duration
		delay  time.Duration
		revoc  bool
	)
	cmd := &cobra.Command{
		Use:   "lock <path> [-- command args...]",
		Short: "Hold a lock while a command runs (or until interrupted)",
		Long: `lock acquires <path> on a session and runs the command with
WARDEN_LOCK_PATH, WARDEN_LOCK_TOKEN (the fencing token) and WARDEN_LOCK_LEASE
(the session's lease id, in hex) in its environment. The command runs in a process group of its own. If the
hold ends while the command runs (the session is lost, the lock is revoked or
released by someone else), the whole group, everything the command started
included, is sent SIGTERM (SIGKILL after --grace), and warden exits 3. When
the command exits, whatever it left running in the group is stopped the same
way before the lock is released. On Linux the group is also stopped if warden
itself dies (even by SIGKILL). Without a command it prints the token and
holds the lock until interrupted or lost.

Exit codes: the command's own (128+n if signal n ended it); 2 if the lock was
not granted (--try on a held lock or one in lock-delay, or --wait ran out); 3
if the lock was lost; 130 if warden was interrupted; 1 on other errors.`,
		Args: cobra.MinimumNArgs(1),
		RunE: withConn(func(ctx context.Context, c *client.Client, cmd *cobra.Command, args []string) error {
			s, err := c.NewSession(ctx, client.WithTTL(ttl))
			if err != nil {
				return fail(err)
			}
			defer s.Close(context.Background())
			opts := []client.LockOption{}
			if owner != "" {
				opts = append(opts, client.WithOwner(owner))
			}
			if delay != 0 {
				opts = append(opts, client.WithLockDelay(delay))
			}
			if revoc {
				opts = append(opts, client.WithRevocable())
			}
			m := client.NewRWMutex(s, args[0], opts...)
			if err := acquire(ctx, m, shared, try, wait); err != nil {
				return fail(delayLeft(ctx, c, args[0], err))
			}
			token := m.Token()
			if shared {
				token = m.RToken()
			}
			if revoc || delay != 0 {
				go func() { // tell the operator (and the command's log) about revocation requests
					for r := range c.RevokeRequests(ctx, args[0], token) {
						fmt.Fprintf(os.Stderr, "warden: revocation of %s requested; release before %s\n", args[0], r.Deadline.Format(time.RFC3339))
					}
				}()
			}
			lost := m.Context()
			if shared {
				lost = m.RContext()
			}
			release := func() {
				rctx, cancel := context.WithTimeout(context.Background(), gf.timeout)
				defer cancel()
				if shared {
					m.RUnlock(rctx)
				} else {
					m.Unlock(rctx)
				}
			}
			if len(args) == 1 {
				mode := "exclusive"
				if shared {
					mode = "shared"
				}
				printHeld("locked", heldOut{Path: args[0], Mode: mode, Token: token, Lease: wire.HexID(s.Lease())})
				if err := holdUntilInterrupted(ctx, lost, "lock"); err != nil {
					return err
				}
				release()
				return nil
			}
			err = runHolding(ctx, lost, args[0], lockEnv(args[0], token, s.Lease()), args[1:], grace)
			release()
			return err
		}),
	}
	f := cmd.Flags()
	f.DurationVar(&ttl, "ttl", 10*time.Second, "session TTL (the lock is lost this long after the last acknowledged keepalive)")
	f.DurationVar(&wait, "wait", 0, "how long to wait for the lock (0 = until granted)")
	f.BoolVar(&try, "try", false, "fail at once (exit 2) if the lock is held")
	f.BoolVar(&shared, "shared", false, "take a shared (read) lock")
	f.StringVar(&owner, "owner", "", "owner name within the session (same owner = reentrant)")
	f.DurationVar(&grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL when the command's process group is stopped")
	f.DurationVar(&delay, "lock-delay", 0, "keep the path ungrantable this long if the lock is lost or revoked (<0: none; 0: cluster default)")
	f.BoolVar(&revoc, "revocable", false, "let waiters ask for the lock's revocation (warden locks revoke)")
	bound(f, positive, "ttl")
	bound(f, nonNegative, "wait", "grace")
	return cmd
}

// delayLeft adds to a lock-delay refusal how long the delay has left.
func delayLeft(ctx context.Context, c *client.Client, path string, err error) error {
	if !errors.Is(err, client.ErrLockDelayed) {
		return err
	}
	ictx, cancel := opCtx(ctx)
	defer cancel()
	if info, ierr := c.LockInfo(ictx, path); ierr == nil && !info.DelayUntil.IsZero() {
		return fmt.Errorf("%w (%s left)", err, time.Until(info.DelayUntil).Round(100*time.Millisecond))
	}
	return err
}

func acquire(ctx context.Context, m *client.RWMutex, shared, try bool, wait time.Duration) error {
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	var err error
	switch {
	case try && shared:
		err = m.TryRLock(ctx)
	case try:
		err = m.TryLock(ctx)
	case shared:
		err = m.RLock(ctx)
	default:
		err = m.Lock(ctx)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return client.ErrTimeout
	}
	return err
}
