// Package chaos is Warden's multi-process fault suite: it runs real
// `warden serve` processes behind userspace TCP proxies, injects crashes,
// pauses, partitions and clock skew, records every client operation and
// checks the histories (porcupine linearizability, fencing, lease bounds,
// watch and election properties). See docs/testing.md, "The fault suite".
package chaos
