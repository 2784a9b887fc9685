package admin

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/router"
)

//go:embed page.html
var pageHTML string

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"ttl": func(ms int64) string {
		if ms <= 0 {
			return "–"
		}
		return (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond).String()
	},
	// heard is when a node last answered, relative to the page's time.
	"heard":   router.HeardAgo,
	"percent": func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" },
	// cpu is a node's CPU use as a share of what it may use.
	"cpu": func(r *cpuload.Reading) string {
		if r == nil || r.Capacity <= 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f%% of %.3g cores", 100*r.Share(), r.Capacity)
	},
}).Parse(pageHTML))

type pageData struct {
	Status
	Scheme    string // of the links to other nodes' admin ports
	ShowLocks bool   // the lock browser (owners, leases): the admin role only
	Prefix    string
	Locks     []Lock
	LockErr   string
	Rendered  string
	Now       time.Time
}

// page renders the status page: the cluster overview and, for a caller with
// the admin role, the locks held under ?prefix= (default /). Plain
// server-side HTML; no scripts.
func (s *Server) page(ctx *fasthttp.RequestCtx, showLocks bool) {
	now := time.Now().UTC()
	d := pageData{Status: s.status(), Scheme: "http", ShowLocks: showLocks, Prefix: queryPrefix(ctx),
		Rendered: now.Format(time.RFC3339), Now: now}
	if s.cfg.TLS != nil {
		d.Scheme = "https"
	}
	if showLocks {
		qctx, cancel := s.queryCtx()
		defer cancel()
		locks, err := s.locks(qctx, d.Prefix, queryLimit(ctx))
		if err != nil {
			d.LockErr = err.Error()
		}
		d.Locks = locks
	}
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, d); err != nil {
		ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
		return
	}
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(b.Bytes())
}
