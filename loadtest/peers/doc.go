// Package peers holds the load-test drivers for Warden's peers (etcd,
// ZooKeeper, Redis) and the harness that starts them on 127.0.0.1. It is its
// own Go module so their client libraries never enter Warden's go.mod.
package peers
