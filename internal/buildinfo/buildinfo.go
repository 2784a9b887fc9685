// Package buildinfo names the running build: its version and the commit it
// was built from, as the Makefile's -ldflags set them, else as the Go
// toolchain recorded them (a `go build` in a git clone records the commit;
// one in a git worktree, or with -buildvcs=false, does not).
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// version and commit are set at link time (the Makefile's build does):
//
//	go build -ldflags "-X github.com/wardenlock/warden/internal/buildinfo.version=v1.2.3 \
//	    -X github.com/wardenlock/warden/internal/buildinfo.commit=$(git rev-parse HEAD)"
//
// Without them the version is the module's (a `go install ...@version`),
// else "dev", and the commit is the toolchain's record, if any.
var version, commit string

// Info describes one build.
type Info struct {
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`      // full revision hash; empty when unknown
	Modified   bool   `json:"modified,omitempty"`    // built from a tree with uncommitted changes
	CommitTime string `json:"commit_time,omitempty"` // the commit's time (RFC 3339), as the toolchain recorded it
	GoVersion  string `json:"go_version"`
}

var (
	once sync.Once
	info Info
)

// Get returns the running build's description.
func Get() Info {
	once.Do(func() { info = read(version, commit) })
	return info
}

func read(linkedVersion, linkedCommit string) Info {
	in := Info{Version: linkedVersion, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = s.Value
			case "vcs.time":
				in.CommitTime = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	if linkedCommit != "" && linkedCommit != in.Commit {
		in.Commit, in.CommitTime, in.Modified = linkedCommit, "", false
	}
	return in
}

// ShortCommit is the commit's first 12 hex digits ("" when unknown), with
// "+dirty" when the tree had uncommitted changes.
func (in Info) ShortCommit() string {
	c := in.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if c != "" && in.Modified {
		c += "+dirty"
	}
	return c
}

// String is the one-line form `warden version` prints.
func (in Info) String() string {
	s := "warden " + in.Version
	if c := in.ShortCommit(); c != "" {
		s += " (commit " + c + ")"
	}
	return s + " " + in.GoVersion
}
