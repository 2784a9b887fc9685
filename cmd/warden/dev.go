package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/node"
)

func devCmd() *cobra.Command {
	var (
		dataDir string
		n, port int
		shards  int
		level   string
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local 3-node cluster in one process (for development)",
		Long: `dev starts n nodes in this process on 127.0.0.1: clients on port, port+1, ...,
Raft on port+100..., admin HTTP on port+200.... Data lives in --data-dir and
survives restarts. Every CLI verb reaches it with no flags.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			log := newLogger(level)
			cfgs := node.LocalCluster(n, dataDir, port)
			secret := randomSecret()
			for i := range cfgs {
				cfgs[i].PeerSecret = secret
				cfgs[i].DataShards = shards
				cfgs[i].Log = log
			}
			fmt.Fprintf(os.Stderr, "warden dev: %d nodes, clients on 127.0.0.1:%d-%d (plaintext, no auth: development only), data in %s (Ctrl-C stops)\n",
				n, port, port+n-1, dataDir)
			return runNodes(cfgs, log, nil)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "./data", "data directory")
	cmd.Flags().IntVar(&n, "nodes", 3, "number of nodes")
	cmd.Flags().IntVar(&port, "port", 7070, "first client port")
	cmd.Flags().IntVar(&shards, "shards", 8, "data shards")
	cmd.Flags().StringVar(&level, "log-level", "warn", "log level")
	return cmd
}
