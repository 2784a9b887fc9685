// Package admin serves a node's admin HTTP port: /livez and /readyz with
// named checks, Prometheus /metrics, the JSON status API under /v1/ and a
// server-rendered status page at /, each to the roles it is for (the client
// port's identities), on a listener that bounds what one address can hold.
package admin
