package admin

import (
	"context"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"
)

// The net/http handler must run under our context, never the
// *fasthttp.RequestCtx: a context derived from that one reads the fasthttp
// server's done channel from a goroutine of its own, racing with shutdown.
func TestAdaptContext(t *testing.T) {
	life, stop := context.WithCancel(context.Background())
	var got context.Context
	h := adapt(life, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Context()
		w.WriteHeader(http.StatusNoContent)
	}))
	var req fasthttp.Request
	req.SetRequestURI("/metrics")
	var rc fasthttp.RequestCtx
	rc.Init(&req, nil, nil)
	h(&rc)
	if rc.Response.StatusCode() != http.StatusNoContent {
		t.Fatalf("status %d", rc.Response.StatusCode())
	}
	if got != life {
		t.Fatalf("handler context is %T, want the server's own", got)
	}
	stop()
	if got.Err() == nil {
		t.Fatal("the handler's context outlived the server's")
	}
}
