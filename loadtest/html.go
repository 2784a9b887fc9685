package loadtest

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// The HTML report is one self-contained file: tables and inline SVG charts,
// no scripts, nothing fetched from elsewhere.

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"}

type chartSeries struct {
	Name   string
	Points [][2]float64 // x, y
}

const chartW, chartH, padL, padR, padT, padB = 640.0, 260.0, 64.0, 130.0, 28.0, 36.0

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// lineChart draws series as polylines with axes, grid and a legend.
func lineChart(title, xLabel, yLabel string, series []chartSeries) template.HTML {
	var xmax, ymax float64
	for _, s := range series {
		for _, p := range s.Points {
			xmax, ymax = math.Max(xmax, p[0]), math.Max(ymax, p[1])
		}
	}
	xmax, ymax = math.Max(xmax, 1), niceMax(ymax)
	pw, ph := chartW-padL-padR, chartH-padT-padB
	x := func(v float64) float64 { return padL + v/xmax*pw }
	y := func(v float64) float64 { return padT + ph - v/ymax*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img">`, chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<text x="%.0f" y="18" class="t">%s</text>`, padL, template.HTMLEscapeString(title))
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="g"/>`, padL, y(v), padL+pw, y(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="yl">%s</text>`, padL-6, y(v)+4, fmtNum(v))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="xl">0</text><text x="%.1f" y="%.1f" class="xl">%s</text>`,
		padL, padT+ph+16, padL+pw, padT+ph+16, fmtNum(xmax))
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="xl">%s</text>`, padL+pw/2, chartH-4, template.HTMLEscapeString(xLabel))
	fmt.Fprintf(&b, `<text x="14" y="%.1f" class="yl" transform="rotate(-90 14 %.1f)">%s</text>`, padT+ph/2, padT+ph/2, template.HTMLEscapeString(yLabel))
	for i, s := range series {
		col := palette[i%len(palette)]
		var pts []string
		for _, p := range s.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1])))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`, col, strings.Join(pts, " "))
		ly := padT + 14*float64(i)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/><text x="%.1f" y="%.1f" class="lg">%s</text>`,
			padL+pw+10, ly, col, padL+pw+24, ly+9, template.HTMLEscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

type bar struct {
	Label  string
	Values []float64 // one per group
}

// barChart draws grouped horizontal bars (one group per label, one bar per
// group name), for example p50/p99/p99.9 of each driver.
func barChart(title, unit string, groups []string, bars []bar) template.HTML {
	var vmax float64
	for _, br := range bars {
		for _, v := range br.Values {
			vmax = math.Max(vmax, v)
		}
	}
	vmax = niceMax(vmax)
	rowH := 12.0
	blockH := rowH*float64(len(groups)) + 10
	h := padT + blockH*float64(len(bars)) + 24
	left, pw := 150.0, chartW-150-padR
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img">`, chartW, h, chartW, h)
	fmt.Fprintf(&b, `<text x="%.0f" y="18" class="t">%s</text>`, left, template.HTMLEscapeString(title))
	for i, br := range bars {
		y0 := padT + blockH*float64(i)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="yl">%s</text>`, left-6, y0+blockH/2, template.HTMLEscapeString(br.Label))
		for j, v := range br.Values {
			w := v / vmax * pw
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/><text x="%.1f" y="%.1f" class="lg">%s</text>`,
				left, y0+rowH*float64(j), math.Max(w, 0.5), rowH-2, palette[j%len(palette)], left+w+4, y0+rowH*float64(j)+9, fmtNum(v))
		}
	}
	for j, g := range groups {
		ly := padT + 14*float64(j)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/><text x="%.1f" y="%.1f" class="lg">%s %s</text>`,
			left+pw+40, ly, palette[j%len(palette)], left+pw+54, ly+9, template.HTMLEscapeString(g), unit)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

type htmlSection struct {
	Scenario string
	Results  []*Result
	Charts   []template.HTML
}

// primaryOp is the op a scenario's charts show.
func primaryOp(r *Result) string {
	for _, op := range []string{"cycle", "acquire", "campaign", "delivery"} {
		if _, ok := r.Ops[op]; ok {
			return op
		}
	}
	return ""
}

func sections(rep *Report) []htmlSection {
	var out []htmlSection
	idx := map[string]int{}
	for _, r := range rep.Results {
		i, ok := idx[r.Scenario]
		if !ok {
			i = len(out)
			idx[r.Scenario] = i
			out = append(out, htmlSection{Scenario: r.Scenario})
		}
		out[i].Results = append(out[i].Results, r)
	}
	for i := range out {
		s := &out[i]
		var tput, p99 []chartSeries
		var bars []bar
		for _, r := range s.Results {
			if r.Unsupported != "" || len(r.Series) == 0 {
				continue
			}
			name := r.Driver + " c=" + fmt.Sprint(r.Clients)
			var a, b chartSeries
			a.Name, b.Name = name, name
			for _, p := range r.Series {
				a.Points = append(a.Points, [2]float64{float64(p.T), float64(p.Ops)})
				b.Points = append(b.Points, [2]float64{float64(p.T), p.P99Ms})
			}
			tput, p99 = append(tput, a), append(p99, b)
			st := r.Ops[primaryOp(r)]
			bars = append(bars, bar{Label: name, Values: []float64{st.P50Ms, st.P99Ms, st.P999Ms}})
		}
		if len(tput) > 0 {
			s.Charts = append(s.Charts,
				lineChart(s.Scenario+": "+primaryOp(s.Results[0])+" per second", "seconds", "ops/s", tput),
				lineChart(s.Scenario+": p99 latency per second", "seconds", "ms", p99),
				barChart(s.Scenario+": latency percentiles", "ms", []string{"p50", "p99", "p99.9"}, bars))
		}
	}
	return out
}

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"keys":    func(m map[string]float64) []string { return sortedKeys(m) },
	"opkeys":  func(m map[string]Stats) []string { return sortedKeys(m) },
	"errkeys": func(m map[string]int64) []string { return sortedKeys(m) },
	"f3":      func(v float64) string { return fmt.Sprintf("%.3f", v) },
	"f0":      func(v float64) string { return fmt.Sprintf("%.0f", v) },
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>{{.Rep.Title}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
svg{display:block;margin:8px 0;background:#fff}.t{font-weight:600;font-size:13px}
.g{stroke:#e5e5e5}.yl{font-size:11px;text-anchor:end}.xl{font-size:11px;text-anchor:middle}.lg{font-size:11px}
.muted{color:#777}
</style></head><body>
<h1>{{.Rep.Title}}</h1>
<p class="muted">{{.Rep.Machine.NProc}} CPUs ({{.Rep.Machine.CPU}}), {{.Rep.Machine.MemGiB}} GiB, Linux {{.Rep.Machine.Kernel}}, {{.Rep.Machine.Go}}, {{.Rep.Machine.Date}}
{{range $k, $v := .Rep.Machine.Versions}}· {{$k}}: {{$v}} {{end}}</p>
{{if .Rep.Command}}<pre>{{.Rep.Command}}</pre>{{end}}
{{range .Sections}}
<h2>{{.Scenario}}</h2>
{{range .Charts}}{{.}}{{end}}
{{range .Results}}
<h3>{{.Driver}} · {{.Mode}} loop · {{.Clients}} clients{{if .Rate}} · rate {{f0 .Rate}}/s{{end}}{{if .Version}} <span class="muted">{{.Version}}</span>{{end}}</h3>
{{if .Unsupported}}<p class="muted">{{.Unsupported}}</p>{{else}}
<table><tr><th>op</th><th>count</th><th>rate/s</th><th>mean ms</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>
{{$ops := .Ops}}{{range opkeys .Ops}}{{$s := index $ops .}}<tr><td>{{.}}</td><td>{{$s.Count}}</td><td>{{f0 $s.Rate}}</td><td>{{f3 $s.MeanMs}}</td><td>{{f3 $s.P50Ms}}</td><td>{{f3 $s.P90Ms}}</td><td>{{f3 $s.P99Ms}}</td><td>{{f3 $s.P999Ms}}</td><td>{{f3 $s.MaxMs}}</td></tr>{{end}}
</table>
<table><tr><th>metric</th><th>value</th></tr>{{$m := .Metrics}}{{range keys .Metrics}}<tr><td>{{.}}</td><td>{{index $m .}}</td></tr>{{end}}</table>
{{if .Errors}}<table><tr><th>error code</th><th>count</th></tr>{{$e := .Errors}}{{range errkeys .Errors}}<tr><td>{{.}}</td><td>{{index $e .}}</td></tr>{{end}}</table>{{end}}
{{range .Notes}}<p class="muted">note: {{.}}</p>{{end}}
{{end}}{{end}}{{end}}
</body></html>
`))

// WriteHTML renders rep as one self-contained HTML page.
func WriteHTML(w io.Writer, rep *Report) error {
	return htmlTmpl.Execute(w, struct {
		Rep      *Report
		Sections []htmlSection
	}{rep, sections(rep)})
}
