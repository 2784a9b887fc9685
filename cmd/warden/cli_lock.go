package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/client"
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
in its environment. If the session is lost while the command runs, the command
is sent SIGTERM (SIGKILL after --grace) before anyone else can be granted the
lock, and warden exits 3. Without a command it prints the token and holds the
lock until interrupted.

Exit codes: the command's own; 2 if the lock was not granted (--try, or
--wait ran out); 3 if the lock was lost; 1 on other errors.`,
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
				return fail(err)
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
				fmt.Printf("locked %s token=%d lease=%d (Ctrl-C releases)\n", args[0], token, s.Lease())
				select {
				case <-ctx.Done():
					release()
					return nil
				case <-lost.Done():
					return &exitError{code: exitLost, err: errors.New("lock lost: session expired")}
				}
			}
			code, err := runHolding(ctx, lost, args[0], token, s.Lease(), args[1:], grace)
			release()
			if err != nil {
				return err
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.DurationVar(&ttl, "ttl", 10*time.Second, "session TTL (the lock is lost this long after the last acknowledged keepalive)")
	f.DurationVar(&wait, "wait", 0, "how long to wait for the lock (0 = until granted)")
	f.BoolVar(&try, "try", false, "fail at once (exit 2) if the lock is held")
	f.BoolVar(&shared, "shared", false, "take a shared (read) lock")
	f.StringVar(&owner, "owner", "", "owner name within the session (same owner = reentrant)")
	f.DurationVar(&grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL when the lock is lost")
	f.DurationVar(&delay, "lock-delay", 0, "keep the path ungrantable this long if the lock is lost or revoked (<0: none; 0: cluster default)")
	f.BoolVar(&revoc, "revocable", false, "let waiters ask for the lock's revocation (warden locks revoke)")
	return cmd
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

// runHolding runs argv while the lock is held. If lost fires first, the
// child is stopped and the exit code is exitLost.
func runHolding(ctx, lost context.Context, path string, token, lease uint64, argv []string, grace time.Duration) (int, error) {
	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.Env = append(os.Environ(),
		"WARDEN_LOCK_PATH="+path,
		"WARDEN_LOCK_TOKEN="+strconv.FormatUint(token, 10),
		"WARDEN_LOCK_LEASE="+strconv.FormatUint(lease, 10))
	if err := child.Start(); err != nil {
		return exitFailure, err
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	stopChild := func() {
		child.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(grace):
			child.Process.Kill()
			<-exited
		}
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), nil
		}
		if err != nil {
			return exitFailure, err
		}
		return 0, nil
	case <-lost.Done():
		stopChild()
		return exitLost, &exitError{code: exitLost, err: errors.New("lock lost while the command ran; the command was stopped")}
	case <-ctx.Done():
		stopChild()
		return exitInterrupted, nil
	}
}
