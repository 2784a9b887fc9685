// Package metrics defines Warden's OpenTelemetry instruments and exports them
// for Prometheus: requests by op and result code, Raft health per shard,
// lock, lease, election and watch counts. Never labelled by lock path.
package metrics
