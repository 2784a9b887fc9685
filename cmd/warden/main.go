// Command warden runs Warden nodes and routers and talks to a cluster from
// the command line. Run `warden help` for the verbs.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes (documented in the README).
const (
	exitOK          = 0
	exitFailure     = 1 // usage, connection or server error
	exitConflict    = 2 // lock held / not granted within the wait
	exitLost        = 3 // the lock or lease was lost while the command ran
	exitNotFound    = 4
	exitInterrupted = 130
)

type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	err := newRoot().Execute()
	if err == nil {
		return
	}
	code := exitFailure
	var ee *exitError
	if errors.As(err, &ee) {
		code, err = ee.code, ee.err
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
	}
	os.Exit(code)
}

// newRoot builds the command tree.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "warden",
		Short:         "Warden: a sharded, linearizable lock and coordination service",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Numeric flags are checked against their bounds first (bounds.go).
		PersistentPreRunE: checkBounds,
	}
	root.AddCommand(serveCmd(), devCmd(), routerCmd(), signingKeyCmd())
	addClientCommands(root)
	root.AddCommand(certsCmd(), superviseCmd())
	return root
}

// errorLine is how an error is shown: one "warden: " prefix, whether or not
// the error's own text starts with one (every server error's does).
func errorLine(err error) string {
	return "warden: " + strings.TrimPrefix(err.Error(), "warden: ")
}
