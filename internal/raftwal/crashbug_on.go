//go:build crashbug

package raftwal

// skipRotationDirSync: see crashbug_off.go. This build is broken on
// purpose.
const skipRotationDirSync = true
