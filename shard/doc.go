// Package shard runs the replicas of one node: the dragonboat NodeHost and
// its control plane (the meta group, range and replica moves, leader
// balance, restore), and per data shard the request path: the batching
// proposer, linearizable reads and parked blocking requests. Each shard's
// lease deadlines are kept by package lease, its watch feed by package
// feed; the Raft transport and log plumbing is package raftnode.
package shard
