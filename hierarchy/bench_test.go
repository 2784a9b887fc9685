package hierarchy

import (
	"fmt"
	"testing"
)

func BenchmarkEnsureDepth8(b *testing.B) {
	tr := New[payload]()
	paths := make([]string, 1024)
	for i := range paths {
		paths[i] = fmt.Sprintf("/a/b/c/d/e/f/g/k-%d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tr.Ensure(paths[i&1023])
	}
}

func BenchmarkHeldConflictDepth8(b *testing.B) {
	tr := New[payload]()
	n := tr.Ensure("/a/b/c/d/e/f/g/h")
	tr.AddHeld(tr.Ensure("/a/b/c/d/e/f/g/x"), ex, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n.HeldConflict(ex) {
			b.Fatal("unexpected conflict")
		}
	}
}

func BenchmarkChildLookupMillion(b *testing.B) {
	tr := New[payload]()
	root := tr.Ensure("/locks")
	names := make([]string, 1<<20)
	for i := range names {
		names[i] = fmt.Sprintf("k-%d", i)
		tr.EnsureChild(root, names[i])
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if root.Child(names[i&(1<<20-1)]) == nil {
			b.Fatal("lost child")
		}
	}
}
