package statemachine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"
)

// TestImageIsTheSnapshot: the in-memory image of a state is byte for byte
// what SaveSnapshot writes, for a state larger than one chunk.
func TestImageIsTheSnapshot(t *testing.T) {
	s := New(modelConfig())
	replay(t, s, randomLog(t, 16, 3000), 1)
	for i := 0; i < 150000; i++ { // enough paths for several chunks
		s.trie.Ensure(fmt.Sprintf("/img/n%d", i)).Val.ext = &nodeExt{leader: []byte{}}
	}
	want := snapshot(t, s)
	im, err := s.Image()
	if err != nil {
		t.Fatal(err)
	}
	if im.Len() != len(want) || len(im.chunks) < 2 {
		t.Fatalf("image of %d bytes in %d chunks, snapshot %d bytes", im.Len(), len(im.chunks), len(want))
	}
	var got bytes.Buffer
	if n, err := im.CopyTo(&got, nil); err != nil || n != int64(len(want)) {
		t.Fatalf("CopyTo: %d, %v", n, err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("the image differs from the snapshot")
	}
	stop := make(chan struct{})
	close(stop)
	if _, err := im.CopyTo(&got, stop); err != sm.ErrSnapshotStopped {
		t.Fatalf("CopyTo with a closed stop channel: %v", err)
	}
}

// TestImageWritesAcrossChunks: writes of any size, across chunk
// boundaries, read back in order.
func TestImageWritesAcrossChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var im Image
	var want []byte
	for len(want) < 3*imageChunk+12345 {
		p := make([]byte, r.IntN(300_000))
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		if n, err := im.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
		want = append(want, p...)
	}
	for i, c := range im.chunks[:len(im.chunks)-1] {
		if len(c) != imageChunk {
			t.Fatalf("chunk %d holds %d bytes, not full", i, len(c))
		}
	}
	var got bytes.Buffer
	if _, err := im.CopyTo(&got, nil); err != nil {
		t.Fatal(err)
	}
	if im.Len() != len(want) || !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("read back %d of %d bytes, equal %v", got.Len(), len(want), bytes.Equal(got.Bytes(), want))
	}
}
