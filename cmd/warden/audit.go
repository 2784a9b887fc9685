package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/admin"
)

func auditCmd() *cobra.Command {
	var (
		adminURL, since, until string
		token                  uint64
		limit                  int
	)
	cmd := &cobra.Command{
		Use:   "audit <prefix>",
		Short: "Show who held locks under <prefix>, with which tokens, and why each grant ended",
		Long: `Reads a node's audit trail (every grant, release, expiry, revocation, hand-off,
queue and KV change applied by its replicas, kept in the node's own store).
Every node records the same events, so any node answers; --since and --until
take RFC 3339 times, unix milliseconds or a duration before now.`,
		Example: `  warden audit /locks/billing --since 2h
  warden audit /locks/billing --since 2026-11-21T03:00:00Z --until 2026-11-21T03:30:00Z
  warden audit /locks/billing --token 9031 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hc, base, err := adminHTTP(adminURL)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			q := url.Values{"prefix": {args[0]}}
			if since != "" {
				q.Set("since", since)
			}
			if until != "" {
				q.Set("until", until)
			}
			if token != 0 {
				q.Set("token", strconv.FormatUint(token, 10))
			}
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			ctx, cancel := opCtx(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/v1/audit?"+q.Encode(), nil)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			resp, err := hc.Do(req)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				return &exitError{code: exitFailure, err: fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))}
			}
			var ans admin.AuditAnswer
			if err := json.Unmarshal(body, &ans); err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			if jsonOutput() {
				return printJSON(cmd.OutOrStdout(), ans)
			}
			w := table(cmd.OutOrStdout())
			fmt.Fprintln(w, "TIME\tPATH\tEVENT\tCAUSE\tTOKEN\tOWNER\tLEASE\tMODE")
			for _, r := range ans.Records {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Format("2006-01-02T15:04:05.000Z07:00"), r.Path, r.Kind,
					dash(r.Cause), dashU(r.Token), dash(r.Owner), leaseStr(uint64(r.Lease)), dash(r.Mode))
			}
			w.Flush()
			if len(ans.Records) == 0 {
				return &exitError{code: exitNotFound, err: fmt.Errorf("no audit records under %s", args[0])}
			}
			return nil
		},
	}
	adminFlag(cmd, &adminURL)
	cmd.Flags().StringVar(&since, "since", "", "from this time (RFC 3339, unix ms, or a duration ago: 2h)")
	cmd.Flags().StringVar(&until, "until", "", "up to this time (same forms)")
	cmd.Flags().Uint64Var(&token, "token", 0, "only records of this fencing token")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many (the most recent); default 1000")
	bound(cmd.Flags(), nonNegative, "limit")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func dashU(v uint64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatUint(v, 10)
}
