// Package control runs a node's Raft host and its control plane: the
// dragonboat NodeHost with the meta group (the placement table) and the
// node's data shard replicas (package shard), joining and leaving, range
// moves, replica moves, leader balance, load-driven splits and the restore
// of a backup.
package control
