package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// The length prefix is read with io.ReadFull's errors: io.EOF before the
// first byte, io.ErrUnexpectedEOF inside the prefix or the body, as before.
func TestReadFrameTruncated(t *testing.T) {
	frame := AppendRequestFrame(nil, &Request{ID: 1, Op: OpAcquire, Path: "/a"})
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"nothing", nil, io.EOF},
		{"one byte of the prefix", frame[:1], io.ErrUnexpectedEOF},
		{"three bytes of the prefix", frame[:3], io.ErrUnexpectedEOF},
		{"prefix only", frame[:FrameHeaderSize], io.EOF}, // as before: the body read sees no byte
		{"half the body", frame[:len(frame)-2], io.ErrUnexpectedEOF},
		{"whole", frame, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, err := ReadFrame(bufio.NewReader(bytes.NewReader(tc.in)), DefaultMaxFrame, nil)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err == nil && !bytes.Equal(body, frame[FrameHeaderSize:]) {
				t.Fatalf("body = %x, want %x", body, frame[FrameHeaderSize:])
			}
		})
	}
}

// Reading frames into a reused buffer allocates nothing: the client's and
// the router's readers do it once per frame.
func TestReadFrameDoesNotAllocate(t *testing.T) {
	var stream []byte
	for i := range 200 {
		stream = AppendRequestFrame(stream, &Request{ID: uint64(i), Op: OpRelease, Path: "/a/b", Token: 9})
	}
	r := bufio.NewReaderSize(bytes.NewReader(stream), 64<<10)
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = ReadFrame(r, DefaultMaxFrame, buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("ReadFrame allocates %.1f times per frame, want 0", allocs)
	}
}
