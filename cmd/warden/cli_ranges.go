package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wardenlock/warden/client"
)

func rangesCmd() *cobra.Command {
	return &cobra.Command{
		Use: "ranges", Short: "Show the ranges (hashed namespace key ranges): shard, generation, load, moves",
		RunE: withClient(func(ctx context.Context, c *client.Client, args []string) error {
			rows, err := c.RangeList(ctx)
			if err != nil {
				return fail(err)
			}
			if gf.output == "json" {
				type r struct {
					Index  int    `json:"index"`
					Start  string `json:"start"`
					End    string `json:"end"`
					Shard  uint64 `json:"shard"`
					Gen    uint64 `json:"gen"`
					Ops    uint64 `json:"ops"`
					Moving string `json:"moving,omitempty"`
				}
				out := []r{}
				for i, x := range rows {
					out = append(out, r{i, hex.EncodeToString([]byte(x.Start)), hex.EncodeToString([]byte(x.End)), x.Shard, x.Gen, x.Ops, x.Moving})
				}
				return printJSON(os.Stdout, out)
			}
			w := table(os.Stdout)
			fmt.Fprintln(w, "#\tSTART\tEND\tSHARD\tGEN\tOPS\tMOVE")
			for i, x := range rows {
				fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%d\t%s\n", i, keyText(x.Start, "(start)"), keyText(x.End, "(end)"), x.Shard, x.Gen, x.Ops, x.Moving)
			}
			return w.Flush()
		}),
	}
}

func keyText(k, empty string) string {
	if k == "" {
		return empty
	}
	return hex.EncodeToString([]byte(k))
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
			fmt.Println("split")
			return nil
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
			fmt.Println("merged")
			return nil
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
			fmt.Printf("move %d started\n", id)
			return nil
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
