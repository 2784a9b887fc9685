package buildinfo

import (
	"runtime"
	"testing"
)

func TestReadPrefersTheLinkedValues(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	in := read("v1.2.3", rev)
	if in.Version != "v1.2.3" || in.Commit != rev || in.GoVersion != runtime.Version() {
		t.Fatalf("read = %+v", in)
	}
	if got := in.String(); got != "warden v1.2.3 (commit 0123456789ab) "+runtime.Version() {
		t.Fatalf("String = %q", got)
	}
	// A test binary has no module version: the version is "dev".
	if in := read("", ""); in.Version != "dev" {
		t.Fatalf("read without linked values = %+v", in)
	}
	if c := (Info{Commit: rev, Modified: true}).ShortCommit(); c != "0123456789ab+dirty" {
		t.Fatalf("ShortCommit of a modified tree = %q", c)
	}
}
