package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/wardenlock/warden/loadtest"
)

// The report's two charts, as small self-contained SVG files: the same
// outcomes always give the same bytes, so a chart committed beside its JSON
// can be checked against it.

// colors gives each system a fixed color; Warden's columns share one hue.
func color(system string) string {
	switch {
	case strings.HasPrefix(system, "warden"):
		if system == "warden-8" {
			return "#5b8def"
		}
		return "#1f4fbf"
	case system == "etcd":
		return "#e0863a"
	case system == "zookeeper":
		return "#4aa564"
	case system == "redis":
		return "#c94b4b"
	}
	return "#888888"
}

const (
	chartWidth = 720
	labelWidth = 110
	barHeight  = 18
	font       = `font-family="sans-serif" font-size="12"`
)

type svgDoc struct {
	b strings.Builder
	h int
}

func (d *svgDoc) text(x, y int, anchor, s string, extra string) {
	fmt.Fprintf(&d.b, `<text x="%d" y="%d" text-anchor="%s" %s%s>%s</text>`+"\n", x, y, anchor, font, extra, html.EscapeString(s))
}

func (d *svgDoc) write(w io.Writer, title string) error {
	_, err := fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n<title>%s</title>\n"+`<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n%s</svg>\n",
		chartWidth, d.h, chartWidth, d.h, html.EscapeString(title), d.b.String())
	return err
}

// barPanel is one step of the comparison: a bar per system.
type barPanel struct {
	title, unit string
	label       string // the step's label in the outcomes
}

// peersChart draws the throughput steps as horizontal bars, one panel per
// step, each bar labelled with its value.
func peersChart(w io.Writer, outs []loadtest.Outcome) error {
	panels := []barPanel{
		{"uncontended, 1,024 clients", "lock ops/s", "uncontended c=1024"},
		{"uncontended, 256 clients", "lock ops/s", "uncontended c=256"},
		{"contended, 32 clients on one lock", "hand-offs/s", "contended c=32, 1 hot lock"},
	}
	systems, cell := index(outs)
	d := &svgDoc{}
	y := 24
	d.text(chartWidth/2, y, "middle", "Warden and its peers (3 replicas each; Redis: one server, no fsync)", ` font-weight="bold"`)
	y += 14
	for _, p := range panels {
		var vals []float64
		var names []string
		for _, s := range systems {
			o, ok := cell[[2]string{s, p.label}]
			if !ok || o.Median == nil || o.Median.Unsupported != "" {
				continue
			}
			v, _ := loadtest.Headline(o.Median)
			vals, names = append(vals, v), append(names, s)
		}
		if len(vals) == 0 {
			continue
		}
		y += 22
		d.text(labelWidth, y, "start", p.title+" ("+p.unit+")", ` font-weight="bold"`)
		y += 6
		top := 0.0
		for _, v := range vals {
			top = math.Max(top, v)
		}
		span := float64(chartWidth - labelWidth - 90)
		for i, v := range vals {
			wpx := 0
			if top > 0 {
				wpx = int(math.Round(v / top * span))
			}
			fmt.Fprintf(&d.b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", labelWidth, y, wpx, barHeight, color(names[i]))
			d.text(labelWidth-6, y+13, "end", names[i], "")
			d.text(labelWidth+wpx+6, y+13, "start", thousands(v), "")
			y += barHeight + 4
		}
	}
	d.h = y + 12
	return d.write(w, "Warden and its peers")
}

// latencyChart draws the acquire latency distribution (p50, p90, p99,
// p99.9, max) of each system, one panel per step, on a logarithmic axis.
func latencyChart(w io.Writer, outs []loadtest.Outcome) error {
	steps := []struct{ title, label string }{
		{"one client", "uncontended c=1"},
		{"1,024 clients", "uncontended c=1024"},
	}
	systems, cell := index(outs)
	pct := []string{"p50", "p90", "p99", "p99.9", "max"}
	d := &svgDoc{}
	y := 24
	d.text(chartWidth/2, y, "middle", "Acquire latency in ms, logarithmic (legend: each system's p99)", ` font-weight="bold"`)
	y += 10
	const plotH, left, right = 170, 70, 170
	for _, st := range steps {
		var series [][]float64
		var names []string
		lo, hi := math.Inf(1), 0.0
		for _, s := range systems {
			o, ok := cell[[2]string{s, st.label}]
			if !ok || o.Median == nil || o.Median.Unsupported != "" {
				continue
			}
			a, ok := o.Median.Ops["acquire"]
			if !ok || a.Count == 0 {
				continue
			}
			v := []float64{a.P50Ms, a.P90Ms, a.P99Ms, a.P999Ms, a.MaxMs}
			for _, x := range v {
				if x > 0 {
					lo, hi = math.Min(lo, x), math.Max(hi, x)
				}
			}
			series, names = append(series, v), append(names, s)
		}
		if len(series) == 0 {
			continue
		}
		y += 26
		d.text(left, y, "start", st.title, ` font-weight="bold"`)
		y += 10
		top := y
		lo10, hi10 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if hi10 == lo10 {
			hi10++
		}
		ypos := func(ms float64) float64 {
			if ms <= 0 {
				ms = lo
			}
			return float64(top+plotH) - (math.Log10(ms)-lo10)/(hi10-lo10)*plotH
		}
		xpos := func(i int) float64 {
			return left + float64(i)*float64(chartWidth-left-right)/float64(len(pct)-1)
		}
		for e := lo10; e <= hi10; e++ {
			yy := ypos(math.Pow(10, e))
			fmt.Fprintf(&d.b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>`+"\n", left, yy, chartWidth-right, yy)
			d.text(left-6, int(yy)+4, "end", trimFloat(math.Pow(10, e)), "")
		}
		for i, p := range pct {
			d.text(int(xpos(i)), top+plotH+16, "middle", p, "")
		}
		for k, v := range series {
			var pts []string
			for i, ms := range v {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xpos(i), ypos(ms)))
			}
			c := color(names[k])
			fmt.Fprintf(&d.b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), c)
			for _, p := range pts {
				xy := strings.Split(p, ",")
				fmt.Fprintf(&d.b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], c)
			}
			ly := top + 14 + 18*k
			fmt.Fprintf(&d.b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", chartWidth-right+14, ly-10, c)
			d.text(chartWidth-right+32, ly, "start", fmt.Sprintf("%s %s ms", names[k], trimFloat(v[2])), "")
		}
		y = top + plotH + 22
	}
	d.h = y + 6
	return d.write(w, "Acquire latency")
}

// index orders the systems as they first appear and maps (system, step
// label) to its outcome.
func index(outs []loadtest.Outcome) ([]string, map[[2]string]loadtest.Outcome) {
	var systems []string
	seen := map[string]bool{}
	cell := map[[2]string]loadtest.Outcome{}
	for _, o := range outs {
		if !seen[o.System] {
			seen[o.System] = true
			systems = append(systems, o.System)
		}
		cell[[2]string{o.System, o.Label}] = o
	}
	return systems, cell
}

// thousands formats v with no decimals and thin grouping commas.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
