// Package wire defines Warden's protocol: operation codes, typed error codes,
// the request, response and event records, and the length-prefixed msgpack
// framing used on client connections and inside Raft entries. It is the only
// package the client and the server share; docs/protocol.md describes it for
// implementers in other languages.
package wire
