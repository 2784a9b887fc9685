//go:build !crashbug

package raftwal

// skipRotationDirSync leaves out the directory sync that makes a new
// segment's name durable. Only builds tagged crashbug set it, to show that
// the power-loss test (power_test.go) reports the acknowledged records it
// loses; a build without the tag cannot.
const skipRotationDirSync = false
