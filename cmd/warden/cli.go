package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/client"
)

// Right after `make run` every verb reaches the local cluster with no flags.
const defaultEndpoints = "127.0.0.1:7070,127.0.0.1:7071,127.0.0.1:7072"

type globalFlags struct {
	endpoints string
	output    string
	timeout   time.Duration
}

var gf globalFlags

func addClientCommands(root *cobra.Command) {
	pf := root.PersistentFlags()
	def := os.Getenv("WARDEN_ENDPOINTS")
	if def == "" {
		def = defaultEndpoints
	}
	pf.StringVar(&gf.endpoints, "endpoints", def, "comma-separated node or router addresses (env WARDEN_ENDPOINTS)")
	pf.StringVarP(&gf.output, "output", "o", "table", "output format: table or json")
	pf.DurationVar(&gf.timeout, "timeout", 10*time.Second, "per-request timeout")
	bound(pf, positive, "timeout")
	addClientSecurityFlags(pf)
	root.AddCommand(lockCmd(), electCmd(), watchCmd(), kvCmd(), locksCmd(), statusCmd(), rangesCmd(), rangeCmd())
	root.AddCommand(semCmd(), lockAllCmd())
	root.AddCommand(benchCmd())
	root.AddCommand(snapshotCmd(), restoreCmd(), auditCmd())
	root.AddCommand(nodeCmd(), replicaCmd(), shardsCmd()) // cli_machines.go
	root.AddCommand(versionCmd())
}

// signalContext is cancelled on SIGINT/SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func connect(ctx context.Context) (*client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, gf.timeout)
	defer cancel()
	opts, err := clientSecurityOptions()
	if err != nil {
		return nil, &exitError{code: exitFailure, err: err}
	}
	c, err := client.New(dctx, strings.Split(gf.endpoints, ","), append(opts, client.WithRequestTimeout(gf.timeout))...)
	if err != nil {
		return nil, &exitError{code: exitFailure, err: fmt.Errorf("connect to %s: %w", gf.endpoints, err)}
	}
	return c, nil
}

func opCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, gf.timeout)
}

// fail maps a client error to the documented exit codes.
func fail(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, client.ErrConflict), errors.Is(err, client.ErrTimeout), errors.Is(err, client.ErrLockDelayed):
		return &exitError{code: exitConflict, err: err}
	case errors.Is(err, client.ErrNotFound):
		return &exitError{code: exitNotFound, err: err}
	case errors.Is(err, client.ErrSessionExpired):
		return &exitError{code: exitLost, err: err}
	case errors.Is(err, context.Canceled):
		return &exitError{code: exitInterrupted, err: err}
	}
	return &exitError{code: exitFailure, err: err}
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 2, 4, 2, ' ', 0) }

func ms(d int64) string {
	if d <= 0 {
		return "-"
	}
	return (time.Duration(d) * time.Millisecond).Round(100 * time.Millisecond).String()
}
