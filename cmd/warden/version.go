package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/internal/buildinfo"
)

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version and the commit it was built from",
		Long: `version prints the build of this binary: the version the Makefile set
(git describe), the commit and whether the tree had uncommitted changes, and
the Go version. A node reports the same in ` + "`warden status`" + `, /v1/status and the
warden_build_info metric.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := buildinfo.Get()
			if jsonOutput() {
				return printJSON(cmd.OutOrStdout(), in)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), in)
			return err
		},
	}
}
