package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenlock/warden/loadtest"
)

// wellFormed fails the test unless b is one well-formed XML document.
func wellFormed(t *testing.T, name string, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", name, err)
		}
	}
}

func TestChartsNameEverySystemAndValue(t *testing.T) {
	const un, ct = "uncontended c=1024", "contended c=32, 1 hot lock"
	lat := func(p50, p99 float64) map[string]loadtest.Stats {
		return map[string]loadtest.Stats{"acquire": {Count: 100, P50Ms: p50, P90Ms: p50 * 2, P99Ms: p99, P999Ms: p99 * 2, MaxMs: p99 * 3}}
	}
	outs := []loadtest.Outcome{
		outcome("warden", un, "uncontended", 1024, map[string]float64{"lock_ops_per_s": 103374}, lat(9, 22.6)),
		outcome("warden", "uncontended c=1", "uncontended", 1, map[string]float64{"lock_ops_per_s": 1644}, lat(0.6, 0.92)),
		outcome("warden", ct, "contended", 32, map[string]float64{"handoffs_per_s": 1447}, nil),
		outcome("etcd", un, "uncontended", 1024, map[string]float64{"lock_ops_per_s": 6812}, lat(147, 300)),
		outcome("etcd", ct, "contended", 32, map[string]float64{"handoffs_per_s": 257}, nil),
	}
	var p, l bytes.Buffer
	if err := peersChart(&p, outs); err != nil {
		t.Fatal(err)
	}
	if err := latencyChart(&l, outs); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, "peers chart", p.Bytes())
	wellFormed(t, "latency chart", l.Bytes())
	for _, want := range []string{">warden<", ">etcd<", ">103,374<", ">6,812<", ">1,447<", ">257<", "hand-offs/s"} {
		if !strings.Contains(p.String(), want) {
			t.Errorf("peers chart lacks %q", want)
		}
	}
	for _, want := range []string{"warden 22.6 ms", "etcd 300 ms", "one client", "1,024 clients", ">p99.9<"} {
		if !strings.Contains(l.String(), want) {
			t.Errorf("latency chart lacks %q", want)
		}
	}
}

// TestCommittedChartsComeFromTheCommittedRun: docs/bench/{peers,latency}.svg
// are what `peerbench --from docs/bench/peers.json` draws, byte for byte.
func TestCommittedChartsComeFromTheCommittedRun(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "..", "docs", "bench")
	b, err := os.ReadFile(filepath.Join(dir, "peers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s saved
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	for name, draw := range map[string]func(io.Writer, []loadtest.Outcome) error{"peers.svg": peersChart, "latency.svg": latencyChart} {
		var got bytes.Buffer
		if err := draw(&got, s.Outcomes); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("docs/bench/%s differs from what peers.json draws: regenerate it with "+
				"`make bench-charts`", name)
		}
	}
}
