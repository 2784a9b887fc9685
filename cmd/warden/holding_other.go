//go:build !linux

package main

import "syscall"

// groupAttr starts a held command's supervisor as the leader of a new
// process group. Only Linux has a parent-death signal: elsewhere a wrapper
// killed with SIGKILL leaves the command running.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
