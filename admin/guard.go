package admin

import (
	"bytes"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/wardenlock/warden/auth"
)

// role is what a caller of the admin port may see. With authentication on
// (the router has a policy) it follows from the caller's identity, proven
// exactly as on the client port (auth.Policy.Identify: a bearer token in
// the Authorization header, else a verified client certificate), and from
// the grants of its roles on "/". With authentication off every caller is
// an operator, as every client may do everything on the client port; then
// the port is plaintext on loopback only, or TLS (CheckExposure).
type role uint8

const (
	// roleAnyone: the probes, /livez, /readyz and /healthz, answer their
	// status and "ok" or "check failed", nothing more.
	roleAnyone role = iota
	// roleRead (read on "/"): status, metrics, the shard view, the probes'
	// per-check detail, the status page without its lock browser.
	roleRead
	// roleAdmin (admin on "/"): everything, including what exposes data
	// or clients: locks with owners and leases, sessions, elections with
	// their values, the audit trail, backups.
	roleAdmin
)

func (r role) String() string {
	switch r {
	case roleRead:
		return "read (or admin) on /"
	case roleAdmin:
		return "admin on /"
	}
	return "none"
}

// caller is who sent a request and what it may see.
type caller struct {
	identity string // "" when auth is off or nothing was proven
	role     role
	err      error // why no identity was proven
}

func (s *Server) caller(ctx *fasthttp.RequestCtx) caller {
	pol := s.cfg.Router.Policy()
	if pol == nil {
		return caller{role: roleAdmin}
	}
	id, err := pol.Identify(bearerToken(ctx), certIdentity(ctx))
	if err != nil {
		return caller{err: err}
	}
	return caller{identity: id, role: roleOf(pol, id)}
}

// roleOf maps an identity's grants onto the admin port's roles: admin on
// "/" is everything, read on "/" is the read role, anything narrower is
// no role here (a grant on /locks/billing says nothing about the cluster).
func roleOf(pol *auth.Policy, id string) role {
	switch {
	case pol.Allowed(id, auth.Admin, "/"):
		return roleAdmin
	case pol.Allowed(id, auth.Read, "/"):
		return roleRead
	}
	return roleAnyone
}

// bearerToken is the token of an "Authorization: Bearer <token>" header
// (the scheme is case-insensitive), "" without one.
func bearerToken(ctx *fasthttp.RequestCtx) string {
	h := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	const scheme = "bearer "
	if len(h) <= len(scheme) || !bytes.EqualFold(h[:len(scheme)], []byte(scheme)) {
		return ""
	}
	return string(bytes.TrimSpace(h[len(scheme):]))
}

// certIdentity is the identity of the client certificate the TLS handshake
// verified (the admin port's TLS config verifies one when it is given).
func certIdentity(ctx *fasthttp.RequestCtx) string {
	st := ctx.TLSConnectionState()
	if st == nil || len(st.PeerCertificates) == 0 {
		return ""
	}
	return auth.IdentityFromCert(st.PeerCertificates[0])
}

// refuse answers a caller without the role path needs: 401 when it proved
// no identity, 403 when its identity has too little.
func refuse(ctx *fasthttp.RequestCtx, c caller, need role, path string) {
	if c.identity == "" {
		writeJSON(ctx, map[string]string{"error": fmt.Sprintf("%s needs an identity with %v: %v", path, need, c.err)})
		ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="warden admin"`)
		ctx.SetStatusCode(fasthttp.StatusUnauthorized)
		return
	}
	writeJSON(ctx, map[string]string{"error": fmt.Sprintf("identity %q may not read %s: needs %v", c.identity, path, need)})
	ctx.SetStatusCode(fasthttp.StatusForbidden)
}
