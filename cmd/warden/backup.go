package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/auth"
	"github.com/wardenlock/warden/backup"
	"github.com/wardenlock/warden/node"
)

// defaultAdmin is the first node of `warden dev` / `make run`.
const defaultAdmin = "http://127.0.0.1:7270"

// adminHTTP is an HTTP client for a node's admin port, with TLS from the
// client security flags when the URL is https, and the --token as a bearer
// token (the admin port knows the client port's identities).
func adminHTTP(base string) (*http.Client, string, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	c := &http.Client{Timeout: 5 * time.Minute, Transport: tr}
	if cliSec.token != "" {
		c.Transport = bearerAuth{token: cliSec.token, next: tr}
	}
	if strings.HasPrefix(base, "https://") {
		ca, cert, key := cliSec.caFile, cliSec.cert, cliSec.key
		if cliSec.tlsDir != "" {
			ca = pickS(ca, filepath.Join(cliSec.tlsDir, auth.CAFile))
			if cert == "" {
				cert, key = filepath.Join(cliSec.tlsDir, auth.ClientCert), filepath.Join(cliSec.tlsDir, auth.ClientKeyFile)
			}
		}
		tc, err := auth.ClientConfig(ca, cert, key)
		if err != nil {
			return nil, "", err
		}
		tr.TLSClientConfig = tc
	}
	return c, base, nil
}

// bearerAuth sends a bearer token with every request.
type bearerAuth struct {
	token string
	next  http.RoundTripper
}

func (b bearerAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func adminFlag(cmd *cobra.Command, v *string) {
	def := os.Getenv("WARDEN_ADMIN")
	if def == "" {
		def = defaultAdmin
	}
	cmd.Flags().StringVar(v, "admin", def, "a node's admin URL (env WARDEN_ADMIN); https uses --tls-dir/--cacert/--cert/--key")
}

func snapshotCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "snapshot", Short: "Back up a cluster"}
	var (
		admin  string
		margin uint64
	)
	save := &cobra.Command{
		Use:   "save <dir>",
		Short: "Write every data shard's state, the range table and a manifest with checksums into <dir>",
		Long: `Reads each data shard's whole state with a linearizable read (one consistent
point per shard) through a node's admin API, and the range table after them.
<dir> must be new or empty; manifest.json is written last.`,
		Example: `  warden snapshot save /backups/warden-$(date +%F) --admin http://10.0.0.1:7270`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hc, base, err := adminHTTP(admin)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			ctx, cancel := signalContext()
			defer cancel()
			ctx, cancel2 := context.WithTimeout(ctx, 30*time.Minute)
			defer cancel2()
			m, err := backup.Save(ctx, backup.HTTPSource{Base: base, Client: hc}, args[0],
				backup.Options{FenceMargin: margin, Source: base})
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			if jsonOutput() {
				return printJSON(cmd.OutOrStdout(), m)
			}
			w := table(cmd.OutOrStdout())
			fmt.Fprintln(w, "SHARD\tAPPLIED\tREVISION\tFENCE\tLOCKS\tWAITERS\tLEASES\tKEYS\tBYTES")
			for _, s := range m.Shards {
				fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", s.ID, s.AppliedIndex, s.Rev, s.Fence,
					s.Locks, s.Waiters, s.Leases, s.KVs, s.File.Bytes)
			}
			w.Flush()
			fmt.Fprintf(cmd.OutOrStdout(), "backup written to %s (table generation %d, fence margin %d)\n", args[0], m.TableGen, m.FenceMargin)
			return nil
		},
	}
	adminFlag(save, &admin)
	save.Flags().Uint64Var(&margin, "fence-margin", backup.DefaultFenceMargin,
		"added to each shard's highest token at restore (must exceed the tokens issued after this backup)")
	cmd.AddCommand(save)
	return cmd
}

func restoreCmd() *cobra.Command {
	var (
		dataDir       string
		margin, floor uint64
	)
	cmd := &cobra.Command{
		Use:   "restore <backup-dir>",
		Short: "Prepare a node's empty data dir to start a new cluster from a backup",
		Long: `Verifies the backup's checksums and places it in <data-dir>/restore. Run it on
every node of the new cluster (same number of data shards and namespace
depth as the backed-up one), then start the nodes with ` + "`warden serve`" + `: they
restore the range table and each shard's state through Raft and raise every
shard's fence floor to its backed-up highest token plus the fence margin, so
every token issued after the restore is above every token issued before.`,
		Example: `  warden restore /backups/warden-2026-11-21 --data-dir /var/lib/warden
  warden serve --id 1 --data-dir /var/lib/warden --members ...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := node.PrepareRestore(args[0], dataDir, margin, floor)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			if jsonOutput() {
				return printJSON(cmd.OutOrStdout(), m)
			}
			w := table(cmd.OutOrStdout())
			fmt.Fprintln(w, "SHARD\tLOCKS\tKEYS\tBACKED-UP FENCE\tNEW FLOOR")
			for _, s := range m.Shards {
				fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\n", s.ID, s.Locks, s.KVs, s.Fence, m.Floor(s))
			}
			w.Flush()
			fmt.Fprintf(cmd.OutOrStdout(), "verified; the node restores on its next start from %s\n",
				filepath.Join(dataDir, node.RestoreDirName))
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "./data/node1", "the new node's data dir (must hold no cluster)")
	cmd.Flags().Uint64Var(&margin, "fence-margin", 0, "override the manifest's fence margin")
	cmd.Flags().Uint64Var(&floor, "fence-floor", 0, "lowest fence floor for every shard (e.g. above the highest token your resources have seen)")
	return cmd
}
