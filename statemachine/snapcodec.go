package statemachine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	sm "github.com/lni/dragonboat/v4/statemachine"
)

// Snapshot encoding: varints and length-prefixed strings through a large
// buffered writer. Hand-rolled because a million locks must go out and come
// back in well under two seconds; msgpack reflection would not.

const snapshotMagic = "WARDENSM"

// Version 4 added tagged sections after the trie (sections.go); later
// additions go there rather than bumping the version.
const snapshotVersion = 4

type snapWriter struct {
	w     *bufio.Writer
	buf   [binary.MaxVarintLen64]byte
	err   error
	stop  <-chan struct{}
	ticks int
}

func (w *snapWriter) uvarint(v uint64) {
	n := binary.PutUvarint(w.buf[:], v)
	w.write(w.buf[:n])
}

func (w *snapWriter) varint(v int64) {
	n := binary.PutVarint(w.buf[:], v)
	w.write(w.buf[:n])
}

func (w *snapWriter) flag(b bool) {
	if b {
		w.uvarint(1)
	} else {
		w.uvarint(0)
	}
}

func (w *snapWriter) str(s string) {
	w.uvarint(uint64(len(s)))
	if w.err == nil {
		_, w.err = w.w.WriteString(s)
	}
}

// bytes keeps nil and empty apart: length+1, 0 for nil.
func (w *snapWriter) bytes(b []byte) {
	if b == nil {
		w.uvarint(0)
		return
	}
	w.uvarint(uint64(len(b)) + 1)
	w.write(b)
}

func (w *snapWriter) write(b []byte) {
	if w.err == nil {
		_, w.err = w.w.Write(b)
	}
}

// tick checks now and then whether the replica is shutting down.
func (w *snapWriter) tick() {
	w.ticks++
	if w.ticks&8191 == 0 && stopped(w.stop) && w.err == nil {
		w.err = sm.ErrSnapshotStopped
	}
}

func stopped(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

type snapReader struct {
	r     *bufio.Reader
	err   error
	stop  <-chan struct{}
	ticks int
}

// maxSnapString bounds any one string or value, so a corrupt length cannot
// make recovery allocate without end.
const maxSnapString = 1 << 24

func (r *snapReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(r.r)
	if err != nil {
		r.fail(err)
	}
	return v
}

func (r *snapReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(r.r)
	if err != nil {
		r.fail(err)
	}
	return v
}

func (r *snapReader) flag() bool { return r.uvarint() != 0 }

func (r *snapReader) count(max uint64) int {
	n := r.uvarint()
	if n > max {
		r.fail(fmt.Errorf("count %d over %d", n, max))
		return 0
	}
	return int(n)
}

func (r *snapReader) str() string {
	n := r.count(maxSnapString)
	if n == 0 || r.err != nil {
		return ""
	}
	b := make([]byte, n)
	r.full(b)
	return string(b)
}

func (r *snapReader) bytes() []byte {
	n := r.count(maxSnapString + 1)
	if n == 0 || r.err != nil {
		return nil
	}
	b := make([]byte, n-1)
	r.full(b)
	return b
}

func (r *snapReader) full(b []byte) {
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.fail(err)
	}
}

func (r *snapReader) fail(err error) {
	if r.err == nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		r.err = fmt.Errorf("statemachine: corrupt snapshot: %w", err)
	}
}

func (r *snapReader) tick() {
	r.ticks++
	if r.ticks&8191 == 0 && stopped(r.stop) && r.err == nil {
		r.err = sm.ErrSnapshotStopped
	}
}
