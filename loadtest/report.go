package loadtest

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a set of results with the facts of the machine they ran on.
type Report struct {
	Title   string    `json:"title"`
	Machine Machine   `json:"machine"`
	Command string    `json:"command,omitempty"`
	Results []*Result `json:"results"`
}

// Machine describes where a report was measured.
type Machine struct {
	NProc    int               `json:"nproc"`
	MemGiB   float64           `json:"mem_gib"`
	Kernel   string            `json:"kernel"`
	CPU      string            `json:"cpu"`
	Go       string            `json:"go"`
	Versions map[string]string `json:"versions,omitempty"`
	Date     string            `json:"date"`
	// Disk is the disk probe's result when the benchmark ran one
	// (Machine.ProbeDisk); DiskError says why it failed.
	Disk      *DiskFacts `json:"disk,omitempty"`
	DiskError string     `json:"disk_error,omitempty"`
	// Floor is the round probe's result when the benchmark ran one
	// (Machine.ProbeFloor); FloorError says why it failed.
	Floor      *RoundFacts `json:"round_floor,omitempty"`
	FloorError string      `json:"round_floor_error,omitempty"`
}

// ThisMachine reads the machine's facts from /proc.
func ThisMachine() Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC().Format(time.RFC3339),
		Versions: map[string]string{}}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
				m.MemGiB = float64(int(kb/(1<<20)*10)) / 10
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
				break
			}
		}
	}
	return m
}

// CommandVersion runs a version command and returns its first line ("" on error).
func CommandVersion(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// WriteJSON writes v indented.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteText writes a human summary of each result.
func WriteText(w io.Writer, results ...*Result) error {
	for _, r := range results {
		fmt.Fprintf(w, "== %s / %s (%s loop, %d clients", r.Driver, r.Scenario, r.Mode, r.Clients)
		if r.Rate > 0 {
			fmt.Fprintf(w, ", rate %.0f/s", r.Rate)
		}
		fmt.Fprintf(w, ", %.1fs)", r.ElapsedS)
		if r.Version != "" {
			fmt.Fprintf(w, " [%s]", r.Version)
		}
		fmt.Fprintln(w)
		if r.Unsupported != "" {
			fmt.Fprintf(w, "   unsupported: %s\n\n", r.Unsupported)
			continue
		}
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "op\tcount\trate/s\tmean ms\tp50\tp90\tp99\tp99.9\tmax\t")
		for _, name := range sortedKeys(r.Ops) {
			s := r.Ops[name]
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n",
				name, s.Count, s.Rate, s.MeanMs, s.P50Ms, s.P90Ms, s.P99Ms, s.P999Ms, s.MaxMs)
		}
		_ = tw.Flush()
		for _, k := range sortedKeys(r.Metrics) {
			fmt.Fprintf(w, "   %s = %g\n", k, r.Metrics[k])
		}
		if len(r.Errors) > 0 {
			fmt.Fprintln(w, "   errors by code:")
			for _, k := range sortedKeys(r.Errors) {
				fmt.Fprintf(w, "     %-40s %d\n", k, r.Errors[k])
			}
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "   note: %s\n", n)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// WriteCSV writes one row per (result, op) summary, then one row per
// (result, second) of the time series, in two sections told apart by the
// first column.
func WriteCSV(w io.Writer, results ...*Result) error {
	cw := csv.NewWriter(w)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	_ = cw.Write([]string{"kind", "driver", "scenario", "mode", "clients", "op_or_t", "count", "rate_per_s",
		"mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms", "errors"})
	for _, r := range results {
		var errs int64
		for _, n := range r.Errors {
			errs += n
		}
		base := []string{r.Driver, r.Scenario, r.Mode, strconv.Itoa(r.Clients)}
		for _, name := range sortedKeys(r.Ops) {
			s := r.Ops[name]
			row := append([]string{"summary"}, base...)
			row = append(row, name, strconv.FormatInt(s.Count, 10), f(s.Rate), f(s.MeanMs), f(s.P50Ms),
				f(s.P90Ms), f(s.P99Ms), f(s.P999Ms), f(s.MaxMs), strconv.FormatInt(errs, 10))
			_ = cw.Write(row)
		}
		for _, s := range r.Series {
			row := append([]string{"second"}, base...)
			row = append(row, strconv.Itoa(s.T), strconv.FormatInt(s.Ops, 10), strconv.FormatInt(s.Ops, 10), "",
				f(s.P50Ms), "", f(s.P99Ms), "", f(s.MaxMs), strconv.FormatInt(s.Errors, 10))
			_ = cw.Write(row)
		}
	}
	cw.Flush()
	return cw.Error()
}
