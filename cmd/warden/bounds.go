package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Numeric flags carry their lower bound as an annotation; every verb's
// flags are checked against theirs before it runs, so `--ttl 0` or
// `--wait -1s` is refused with a message instead of quietly meaning
// something else.

const boundKey = "warden-bound"

// Lower bounds a flag may have.
const (
	positive    = ">0"
	nonNegative = ">=0"
	minusOne    = ">=-1" // -1 is a flag's "none"
)

// bound gives the named flags of fs a lower bound.
func bound(fs *pflag.FlagSet, b string, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, boundKey, []string{b}); err != nil {
			panic(err) // a misspelt flag name: a programming error
		}
	}
}

// checkBounds checks every bounded flag of the command about to run.
func checkBounds(cmd *cobra.Command, _ []string) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		b := f.Annotations[boundKey]
		if err != nil || len(b) == 0 {
			return
		}
		v, ok := flagNumber(f)
		if !ok {
			return
		}
		var good bool
		var want string
		switch b[0] {
		case positive:
			good, want = v > 0, "must be positive"
		case nonNegative:
			good, want = v >= 0, "must not be negative"
		case minusOne:
			good, want = v >= -1, "must be -1 (none) or more"
		}
		if !good {
			err = &exitError{code: exitFailure, err: fmt.Errorf("--%s %s: %s", f.Name, f.Value, want)}
		}
	})
	return err
}

// flagNumber reads a numeric flag's value (durations in nanoseconds).
func flagNumber(f *pflag.Flag) (float64, bool) {
	s := f.Value.String()
	switch f.Value.Type() {
	case "duration":
		d, err := time.ParseDuration(s)
		return float64(d), err == nil
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil
	}
	return 0, false
}
