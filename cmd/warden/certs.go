package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/auth"
)

func certsCmd() *cobra.Command {
	var d auth.DevCerts
	var hosts, clients string
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create a development CA with node and client certificates",
		Long: `certs writes a node CA, a client CA, one node certificate (valid for 127.0.0.1,
::1, localhost and --hosts) and client certificates (CN = each --clients name;
the first is client.pem) into --dir. ECDSA P-256, keys 0600. Then:

  warden serve --tls-dir ./certs ...          # TLS 1.3 on every port, mutual TLS for Raft
  warden --tls-dir ./certs status             # the CLI verifies the node and presents client.pem

For production, issue certificates from your own PKI and pass --cacert,
--client-cacert, --cert and --key instead.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			d.Hosts = splitList(hosts)
			d.Clients = splitList(clients)
			if err := d.Generate(); err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			fmt.Fprintf(os.Stderr, "warden certs: wrote a development CA, node and client certificates to %s\n", d.Dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&d.Dir, "dir", "./certs", "output directory")
	cmd.Flags().StringVar(&hosts, "hosts", "", "extra host names or IPs for the node certificate, comma-separated")
	cmd.Flags().StringVar(&clients, "clients", "admin", "client identities to issue, comma-separated")
	cmd.Flags().BoolVar(&d.Force, "force", false, "replace an existing CA in --dir")
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
