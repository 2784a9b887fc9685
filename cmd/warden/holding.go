package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// A command run under a hold (`lock`, `elect`, `sem`, `lock-all` or `kv put
// --ephemeral` with `-- cmd`) must not outlive the hold, and nothing it
// started may either:
//
//   - It runs in a process group of its own, led by a small supervisor
//     process (`warden supervise`, this binary again), so everything it
//     starts, grandchildren included, can be stopped together: when the
//     hold ends for any reason (released, lost with the session, revoked,
//     handed over) the wrapper sends the whole group SIGTERM, then SIGKILL
//     after --grace.
//   - On Linux the supervisor is started with a parent-death signal
//     (SIGTERM): if the wrapper dies, even by SIGKILL, the supervisor stops
//     the group the same way. The kernel sends that signal when the thread
//     that forked the child exits, not the process, and the Go runtime may
//     end an OS thread (one a goroutine locked and did not unlock), so the
//     child is started and waited for from a goroutine that keeps its
//     thread locked for the child's whole life: that thread lives as long
//     as the child.
//
// The group is not the terminal's foreground group: a command that reads
// the terminal is stopped by SIGTTIN. Interrupting the wrapper (Ctrl-C)
// stops the group as a lost hold does.

// lockEnv is what a command run under a lock, permit or leadership finds
// in its environment.
func lockEnv(path string, token, lease uint64) []string {
	return []string{
		"WARDEN_LOCK_PATH=" + path,
		"WARDEN_LOCK_TOKEN=" + strconv.FormatUint(token, 10),
		"WARDEN_LOCK_LEASE=" + strconv.FormatUint(lease, 16),
	}
}

// holdUntilInterrupted waits, for a verb run without a command, until
// warden is interrupted (nil) or the hold whose context is lost ends (exit
// exitLost, the error saying what was lost and why).
func holdUntilInterrupted(ctx, lost context.Context, what string) error {
	select {
	case <-ctx.Done():
		return nil
	case <-lost.Done():
		return &exitError{code: exitLost, err: fmt.Errorf("%s lost: %v", what, context.Cause(lost))}
	}
}

// runHolding runs argv, with env added to its environment, while the hold
// of path whose context is lost lives. If lost ends first, the command's
// process group is stopped and warden exits exitLost; if ctx ends (the
// wrapper was interrupted), it is stopped and warden exits
// exitInterrupted. Otherwise warden exits with the command's own code.
func runHolding(ctx, lost context.Context, path string, env, argv []string, grace time.Duration) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(exe, append([]string{"supervise", "--grace", grace.String(), "--"}, argv...)...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.Env = append(os.Environ(), env...)
	child.SysProcAttr = groupAttr()
	started, exited := startLocked(child)
	if err := <-started; err != nil {
		return err
	}
	pgid := child.Process.Pid // the supervisor leads its own group
	select {
	case err := <-exited:
		stopGroup(pgid, nil, grace) // what the command left running must not outlive the hold either
		code, err := exitCode(err)
		if err != nil {
			return err
		}
		if code != 0 {
			return &exitError{code: code}
		}
		return nil
	case <-lost.Done():
		stopGroup(pgid, exited, grace)
		return &exitError{code: exitLost,
			err: fmt.Errorf("hold of %s lost while the command ran (%v); the command was stopped", path, context.Cause(lost))}
	case <-ctx.Done():
		stopGroup(pgid, exited, grace)
		return &exitError{code: exitInterrupted}
	}
}

// startLocked starts cmd from a goroutine that keeps its OS thread locked
// until cmd has exited (see the parent-death signal above). started gets
// Start's error; exited then gets Wait's.
func startLocked(cmd *exec.Cmd) (started, exited chan error) {
	started, exited = make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	return started, exited
}

// stopGroup stops the process group pgid: SIGTERM, then SIGKILL to what
// is left after grace. exited, when not nil, reports the group leader's
// exit (it is waited for); stopGroup returns once the group is empty or
// has been killed.
func stopGroup(pgid int, exited <-chan error, grace time.Duration) {
	if syscall.Kill(-pgid, 0) != nil && exited == nil {
		return // nothing left
	}
	syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.After(grace)
	if exited != nil {
		select {
		case <-exited:
		case <-deadline:
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-exited
			return
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for syscall.Kill(-pgid, 0) == nil {
		select {
		case <-tick.C:
		case <-deadline:
			syscall.Kill(-pgid, syscall.SIGKILL)
			return
		}
	}
}

// exitCode turns a command's Wait error into the wrapper's exit code: its
// own, or 128+n when signal n ended it (as shells report it).
func exitCode(err error) (int, error) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return exitFailure, err
}

// superviseCmd is the process that leads a held command's group. It runs
// the command in its own group and, when told to stop (SIGTERM, SIGINT or
// SIGHUP: from the wrapper, or the kernel's parent-death signal when the
// wrapper died), stops the whole group: SIGTERM, then SIGKILL after
// --grace. It exits with the command's code.
func superviseCmd() *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:    "supervise [--grace d] -- command args...",
		Short:  "Lead the process group of a command run under a hold (internal)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stop := make(chan os.Signal, 4)
			signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
			child := exec.Command(args[0], args[1:]...)
			child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
			if err := child.Start(); err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			exited := make(chan error, 1)
			go func() { exited <- child.Wait() }()
			var err error
			select {
			case err = <-exited:
			case <-stop:
				group := syscall.Getpgrp()
				syscall.Kill(-group, syscall.SIGTERM) // this process too: it is caught above
				select {
				case err = <-exited:
				case <-time.After(grace):
					syscall.Kill(-group, syscall.SIGKILL) // this process with it
					err = <-exited
				}
			}
			code, err := exitCode(err)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 2*time.Second, "time between SIGTERM and SIGKILL")
	return cmd
}
