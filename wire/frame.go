package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Framing: every frame is a 4-byte big-endian body length followed by one
// msgpack value (a Request from clients, a Response from servers).

// DefaultMaxFrame bounds a frame body unless configured otherwise.
const DefaultMaxFrame = 1 << 20

// FrameHeaderSize is the length prefix size.
const FrameHeaderSize = 4

// FrameSizeError is returned by ReadFrame for a frame over the limit, before
// anything is allocated for it. When Skipped is true the body was read and
// discarded, so the stream is still in step and the connection may go on;
// otherwise (a body larger than MaxSkip) the connection must be closed.
type FrameSizeError struct {
	Size, Max int
	Skipped   bool
}

// MaxSkip is the largest oversized body ReadFrame discards to stay in step.
const MaxSkip = 64 << 20

func (e *FrameSizeError) Error() string {
	return fmt.Sprintf("warden: too large: frame of %d bytes exceeds the limit of %d", e.Size, e.Max)
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *FrameSizeError) Is(target error) bool { return target == ErrTooLarge }

// ReadFrame reads one frame body into buf (grown as needed) and returns it.
// The declared length is checked against max before any allocation; an
// oversized body of up to MaxSkip bytes is discarded to stay in step.
func ReadFrame(r *bufio.Reader, max int, buf []byte) ([]byte, error) {
	return ReadFrameSkip(r, max, MaxSkip, buf)
}

// ReadFrameSkip is ReadFrame with a bound on the oversized body it will
// discard: skip = 0 never reads past the length prefix of an oversized frame
// (a server closes such a connection at once instead of spending its own
// reads on a flood of junk).
func ReadFrameSkip(r *bufio.Reader, max, skip int, buf []byte) ([]byte, error) {
	n, err := readFrameLen(r)
	if err != nil {
		return buf, err
	}
	if n > max {
		e := &FrameSizeError{Size: n, Max: max}
		if n <= min(skip, MaxSkip) {
			_, err := io.CopyN(io.Discard, r, int64(n))
			e.Skipped = err == nil
		}
		return buf, e
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return buf, err
	}
	return buf, nil
}

// readFrameLen reads a frame's length prefix with io.ReadFull's errors
// (io.EOF before any byte, io.ErrUnexpectedEOF within the prefix). It peeks
// at the reader's buffer: a header array passed to io.ReadFull escapes, one
// allocation for every frame read.
func readFrameLen(r *bufio.Reader) (int, error) {
	hdr, err := r.Peek(FrameHeaderSize)
	if len(hdr) < FrameHeaderSize {
		if len(hdr) > 0 && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	n := int(binary.BigEndian.Uint32(hdr))
	r.Discard(FrameHeaderSize)
	return n, nil
}

// AppendFrame appends v (a *Request or *Response) as one frame to dst.
// Both have hand-written encoders (append.go); any other value goes
// through the msgpack library. Hot paths call AppendRequestFrame and
// AppendResponseFrame, which keep their argument off the heap.
func AppendFrame(dst []byte, v msgpack.CustomEncoder) ([]byte, error) {
	switch m := v.(type) {
	case *Request:
		return AppendRequestFrame(dst, m), nil
	case *Response:
		return AppendResponseFrame(dst, m), nil
	}
	start := len(dst)
	b := bytes.NewBuffer(append(dst, 0, 0, 0, 0))
	enc := getEncoder(b)
	err := v.EncodeMsgpack(enc)
	putEncoder(enc)
	dst = b.Bytes()
	if err != nil {
		return dst[:start], err
	}
	return putFrameLen(dst, start), nil
}

// AppendRequestFrame appends r as one frame to dst.
func AppendRequestFrame(dst []byte, r *Request) []byte {
	start := len(dst)
	return putFrameLen(AppendRequest(append(dst, 0, 0, 0, 0), r), start)
}

// AppendResponseFrame appends r as one frame to dst.
func AppendResponseFrame(dst []byte, r *Response) []byte {
	start := len(dst)
	return putFrameLen(AppendResponse(append(dst, 0, 0, 0, 0), r), start)
}

func putFrameLen(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-FrameHeaderSize))
	return dst
}

// DecodeRequest decodes one request frame body. Strings in r share one
// copy of a small body (Reader).
func DecodeRequest(body []byte, r *Request) error {
	rd := NewReader(body, len(body) <= sharedStringLimit)
	if rd.Request(r) && rd.Len() == 0 {
		return nil
	}
	return decode(body, r)
}

// DecodeResponse decodes one response frame body.
func DecodeResponse(body []byte, r *Response) error {
	rd := NewReader(body, len(body) <= sharedStringLimit)
	if rd.Response(r) && rd.Len() == 0 {
		return nil
	}
	return decode(body, r)
}

// decode is the library's road: for what the Reader leaves (rare fields,
// unusual encodings, garbage), with the claims check first.
func decode(body []byte, v msgpack.CustomDecoder) error {
	if err := checkClaims(body); err != nil {
		return &Error{Code: Malformed, Detail: err.Error()}
	}
	d := getDecoder(body)
	err := v.DecodeMsgpack(d.dec)
	if err == nil && d.rd.Len() != 0 {
		err = fmt.Errorf("wire: %d trailing bytes", d.rd.Len())
	}
	if err == nil {
		putDecoder(d) // a decoder that failed may hold a buffer grown by a lying length
	}
	if err != nil {
		return &Error{Code: Malformed, Detail: err.Error()}
	}
	return nil
}

// MarshalRequest encodes a request without a frame header.
func MarshalRequest(r *Request) ([]byte, error) { return AppendRequest(nil, r), nil }

// MarshalResponse encodes a response without a frame header.
func MarshalResponse(r *Response) ([]byte, error) { return AppendResponse(nil, r), nil }

func marshal(v msgpack.CustomEncoder) ([]byte, error) {
	var b bytes.Buffer
	enc := getEncoder(&b)
	err := v.EncodeMsgpack(enc)
	putEncoder(enc)
	return b.Bytes(), err
}

var encPool = sync.Pool{New: func() any {
	e := msgpack.NewEncoder(nil)
	e.UseCompactInts(true)
	return e
}}

func getEncoder(w io.Writer) *msgpack.Encoder {
	e := encPool.Get().(*msgpack.Encoder)
	e.ResetWriter(w)
	return e
}

func putEncoder(e *msgpack.Encoder) {
	e.ResetWriter(nil)
	encPool.Put(e)
}

type pooledDecoder struct {
	rd  bytes.Reader
	dec *msgpack.Decoder
}

var decPool = sync.Pool{New: func() any {
	d := &pooledDecoder{}
	d.dec = msgpack.NewDecoder(&d.rd)
	return d
}}

func getDecoder(b []byte) *pooledDecoder {
	d := decPool.Get().(*pooledDecoder)
	d.rd.Reset(b)
	d.dec.ResetReader(&d.rd)
	return d
}

func putDecoder(d *pooledDecoder) {
	d.rd.Reset(nil)
	decPool.Put(d)
}
