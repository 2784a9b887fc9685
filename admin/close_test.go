package admin_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/wardenlock/warden/node"
	"github.com/wardenlock/warden/node/nodetest"
)

// Closing the admin server after scrapes, or during one, must not race (run
// with -race: fasthttp's RequestCtx used as the scrape's context did, though
// the detector saw it only now and then; TestAdaptContext pins the cause),
// must return promptly, must answer a scrape in flight cleanly (503) and
// must leave no goroutine of the scrapes behind.
func TestCloseAfterAndDuringScrape(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inflight bool
	}{
		{"after scrapes", false},
		{"during a scrape", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := nodetest.Start(t, nodetest.Options{Nodes: 1, Shards: 1, Edit: func(cfg *node.Config) { cfg.AdminAddr = "127.0.0.1:0" }})
			n := c.Nodes[0]
			hc := &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
			defer hc.CloseIdleConnections()
			before := goleak.IgnoreCurrent()

			for range 3 {
				validExposition(t, scrapeOnce(hc, n.Admin.Addr()))
			}
			g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
			n.Admin.Metrics().Registry().MustRegister(g)
			inflight := make(chan scraped, 1)
			if tc.inflight {
				g.arm()
				go func() { inflight <- scrapeOnce(hc, n.Admin.Addr()) }()
				select {
				case <-g.entered:
				case <-time.After(10 * time.Second):
					t.Fatal("the scrape never reached the registry")
				}
			}

			stopped := make(chan struct{})
			go func() { c.StopNode(0); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(15 * time.Second):
				close(g.release)
				t.Fatal("closing the node hung")
			}
			if tc.inflight {
				s := <-inflight
				if s.err != nil || s.code != http.StatusServiceUnavailable {
					t.Errorf("scrape in flight at close: %d %v %.200s, want 503", s.code, s.err, s.body)
				}
			}

			close(g.release) // promhttp's gather of a cancelled scrape ends with it
			hc.CloseIdleConnections()
			// fasthttp stamps Date headers from one goroutine per process,
			// started by the first request and never stopped.
			goleak.VerifyNone(t, before, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"))
		})
	}
}

// gate is a collector whose Collect, once armed, blocks until released: it
// holds a scrape in flight while the admin server closes.
type gate struct {
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (g *gate) arm() { g.mu.Lock(); g.armed = true; g.mu.Unlock() }

func (g *gate) Describe(chan<- *prometheus.Desc) {} // unchecked

func (g *gate) Collect(chan<- prometheus.Metric) {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(g.entered)
		<-g.release
	}
}

type scraped struct {
	code int
	body string
	err  error
}

func scrapeOnce(hc *http.Client, addr string) scraped {
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return scraped{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return scraped{code: resp.StatusCode, body: string(b), err: err}
}

func validExposition(t *testing.T, s scraped) {
	t.Helper()
	if s.err != nil || s.code != http.StatusOK {
		t.Fatalf("scrape: %d %v %.200s", s.code, s.err, s.body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(s.body))
	if err != nil {
		t.Fatalf("scrape: not a Prometheus text exposition: %v", err)
	}
	if _, ok := fams["warden_build_info"]; !ok {
		t.Fatal("scrape: no warden_build_info")
	}
}
