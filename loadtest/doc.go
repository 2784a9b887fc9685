// Package loadtest generates load against Warden and its peers (etcd,
// ZooKeeper, Redis) through one Driver interface, records latency in HDR
// histograms with a per-second time series, and renders text, JSON, CSV and
// self-contained HTML reports. `warden bench` is its command-line face.
package loadtest
