package main

import "syscall"

// groupAttr starts a held command's supervisor as the leader of a new
// process group, with SIGTERM as its parent-death signal (holding.go).
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
