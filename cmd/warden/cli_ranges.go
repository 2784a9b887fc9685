package main

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/wire"
)

func rangesCmd() *cobra.Command {
	return &cobra.Command{
		Use: "ranges", Short: "Show the ranges (hashed namespace key ranges): shard, generation, load, moves",
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			rows, err := c.RangeList(ctx)
			if err != nil {
				return fail(err)
			}
			out := []rangeOut{}
			for i, x := range rows {
				out = append(out, rangeOut{Index: i, Start: wire.RouteKeyHex(x.Start), End: wire.RouteKeyHex(x.End),
					Share: wire.RangeShare(x.Start, x.End), Shard: x.Shard, Gen: x.Gen, Ops: x.Ops, Moving: x.Moving})
			}
			if jsonOutput() {
				return printJSON(os.Stdout, out)
			}
			w := table(os.Stdout)
			fmt.Fprintln(w, "#\tSTART\tEND\tSHARE\tSHARD\tGEN\tOPS\tMOVE")
			for _, r := range out {
				fmt.Fprintf(w, "%d\t%s\t%s\t%.1f%%\t%d\t%d\t%d\t%s\n", r.Index, cmp.Or(r.Start, "(start)"), cmp.Or(r.End, "(end)"),
					100*r.Share, r.Shard, r.Gen, r.Ops, r.Moving)
			}
			return w.Flush()
		}),
	}
}

func rangeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "range", Short: "Split, merge and move ranges (admin)"}
	cmd.AddCommand(&cobra.Command{
		Use: "split <path-or-key>", Short: "Split the range holding a namespace so a new range starts there (a path at or below the namespace depth, or a 16-hex-digit key)",
		Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			key := args[0]
			if !strings.HasPrefix(key, "/") {
				b, err := hex.DecodeString(key)
				if err != nil || len(b) != 8 {
					return fail(fmt.Errorf("%q is neither a path nor a 16-hex-digit key", key))
				}
				key = string(b)
			}
			if err := c.SplitRange(ctx, key); err != nil {
				return fail(err)
			}
			return report(doneOut{Action: "range split", Path: pathArg(args[0]), Range: keyArg(args[0])}, "split")
		}),
	})
	cmd.AddCommand(&cobra.Command{
		Use: "merge <range>", Short: "Merge a range with the next one (same shard); <range> is its # in `warden ranges` or its start key in hex",
		Args: cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			start, err := rangeStart(ctx, c, args[0])
			if err != nil {
				return fail(err)
			}
			if err := c.MergeRange(ctx, start); err != nil {
				return fail(err)
			}
			return report(doneOut{Action: "range merge", Range: wire.RouteKeyHex(start)}, "merged")
		}),
	})
	cmd.AddCommand(&cobra.Command{
		Use: "move <range> <shard>", Short: "Move a range to another shard (runs in the background; watch `warden ranges`)",
		Args: cobra.ExactArgs(2),
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			start, err := rangeStart(ctx, c, args[0])
			if err != nil {
				return fail(err)
			}
			shard, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil {
				return fail(fmt.Errorf("shard %q: %v", args[1], err))
			}
			id, err := c.MoveRange(ctx, start, shard)
			if err != nil {
				return fail(err)
			}
			return report(doneOut{Action: "range move", Range: wire.RouteKeyHex(start), Shard: shard, Move: id},
				fmt.Sprintf("move %d started", id))
		}),
	})
	return cmd
}

// rangeStart resolves "#3" / "3" (an index in `warden ranges`) or a hex
// start key to the range's raw start key.
func rangeStart(ctx context.Context, c *client.Client, arg string) (string, error) {
	if n, err := strconv.Atoi(strings.TrimPrefix(arg, "#")); err == nil && len(arg) < 8 {
		rows, err := c.RangeList(ctx)
		if err != nil {
			return "", err
		}
		if n < 0 || n >= len(rows) {
			return "", fmt.Errorf("no range #%d (there are %d)", n, len(rows))
		}
		return rows[n].Start, nil
	}
	b, err := hex.DecodeString(arg)
	if err != nil {
		return "", fmt.Errorf("%q is neither a range number nor a hex key", arg)
	}
	return string(b), nil
}

// pathArg and keyArg split a path-or-key argument for the JSON report.
func pathArg(a string) string {
	if strings.HasPrefix(a, "/") {
		return a
	}
	return ""
}

func keyArg(a string) string {
	if strings.HasPrefix(a, "/") {
		return ""
	}
	return a
}
