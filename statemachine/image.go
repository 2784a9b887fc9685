package statemachine

import (
	"io"

	sm "github.com/lni/dragonboat/v4/statemachine"
)

// Image is the replicated state encoded at one applied index: the bytes
// SaveSnapshot would write then, held in memory so that they can be written
// out while later entries apply. It is kept in chunks of imageChunk bytes,
// so a large state is never copied to grow one buffer.
type Image struct {
	chunks [][]byte
	size   int
}

// imageChunk is the size of an Image's chunks.
const imageChunk = 1 << 20

// Write appends p; it never fails.
func (im *Image) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		last := len(im.chunks) - 1
		if last < 0 || len(im.chunks[last]) == cap(im.chunks[last]) {
			im.chunks = append(im.chunks, make([]byte, 0, imageChunk))
			last++
		}
		c := im.chunks[last]
		k := min(len(p), cap(c)-len(c))
		im.chunks[last] = append(c, p[:k]...)
		p = p[k:]
	}
	im.size += n
	return n, nil
}

// Len is the image's size in bytes.
func (im *Image) Len() int { return im.size }

// CopyTo writes the image to w, stopping early with sm.ErrSnapshotStopped
// once stop is closed (nil: never).
func (im *Image) CopyTo(w io.Writer, stop <-chan struct{}) (int64, error) {
	var n int64
	for _, c := range im.chunks {
		if stopped(stop) {
			return n, sm.ErrSnapshotStopped
		}
		k, err := w.Write(c)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Image encodes the whole replicated state into memory: exactly the bytes
// SaveSnapshot writes at this applied index. It reads the state, so it
// must not run beside Update (dragonboat calls PrepareSnapshot with
// updates held); writing the image out may.
func (s *StateMachine) Image() (*Image, error) {
	im := &Image{}
	if err := s.encodeState(im, nil); err != nil {
		return nil, err
	}
	return im, nil
}
