// Command warden runs Warden nodes and routers and talks to a cluster from
// the command line. Run `warden help` for the verbs.
package main

import (
	"errors"
	"fmt"
	"os"

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
	root := &cobra.Command{
		Use:           "warden",
		Short:         "Warden: a sharded, linearizable lock and coordination service",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), devCmd(), routerCmd(), signingKeyCmd())
	addClientCommands(root)
	root.AddCommand(certsCmd(), superviseCmd())
	err := root.Execute()
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, "warden:", ee.err)
		}
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "warden:", err)
	os.Exit(exitFailure)
}
