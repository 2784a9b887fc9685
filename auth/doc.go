// Package auth decides who a connection is and what it may do: identities
// from client certificates or bearer tokens, roles that grant permissions on
// path prefixes (deny by default), and the TLS material of nodes and clients
// (including a development CA for `warden certs`).
package auth
