package statemachine

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/wardenlock/warden/wire"
)

// Command layout (one Raft entry):
//
//	byte 0   format version (1)
//	byte 1   kind: 1 = batch of client operations
//	msgpack  int now (leader-stamped unix ms), array of wire.Request
//
// New kinds (range installs, multi-lock transactions) take new kind bytes;
// an old replica answers them Malformed rather than misreading them.
const (
	commandVersion = 1
	kindBatch      = 1
	resultVersion  = 1
)

// EncodeCommand appends one entry holding ops, stamped with now, to dst.
// The encoding is the msgpack library's, written by hand (wire.AppendRequest).
func EncodeCommand(dst []byte, now int64, ops []*wire.Request) ([]byte, error) {
	for i, op := range ops {
		if op == nil {
			return dst, fmt.Errorf("statemachine: op %d is nil", i)
		}
	}
	dst = append(dst, commandVersion, kindBatch)
	dst = wire.AppendInt(dst, now)
	dst = wire.AppendArrayLen(dst, len(ops))
	for _, op := range ops {
		dst = wire.AppendRequest(dst, op)
	}
	return dst, nil
}

// decodeCommand fills s.reqs from one entry and returns its stamped time.
// It decodes everything before anything is applied, so a bad entry changes
// nothing.
func (s *StateMachine) decodeCommand(cmd []byte) (int64, error) {
	if len(cmd) < 2 {
		return 0, errors.New("entry too short")
	}
	if cmd[0] != commandVersion {
		return 0, fmt.Errorf("unknown command version %d", cmd[0])
	}
	if cmd[1] != kindBatch {
		return 0, fmt.Errorf("unknown command kind %d", cmd[1])
	}
	if now, ok := s.fastDecode(cmd[2:]); ok {
		return now, nil
	}
	s.rd.Reset(cmd[2:])
	s.dec.ResetReader(&s.rd)
	now, err := s.dec.DecodeInt64()
	if err != nil {
		return 0, fmt.Errorf("stamp: %w", err)
	}
	n, err := s.dec.DecodeArrayLen()
	if err != nil || n < 0 || n > s.rd.Len() {
		return 0, fmt.Errorf("bad op count %d (%v)", n, err)
	}
	if cap(s.reqs) < n {
		s.reqs = make([]wire.Request, n)
	}
	s.reqs = s.reqs[:n]
	for i := range s.reqs {
		if err := s.reqs[i].DecodeMsgpack(s.dec); err != nil {
			s.reqs = s.reqs[:0]
			return 0, fmt.Errorf("op %d: %w", i, err)
		}
	}
	if s.rd.Len() != 0 {
		s.reqs = s.reqs[:0]
		return 0, fmt.Errorf("%d trailing bytes", s.rd.Len())
	}
	return now, nil
}

func (s *StateMachine) beginResults(n int) {
	s.out = append(s.out[:0], resultVersion)
	s.out = wire.AppendArrayLen(s.out, n)
}

func (s *StateMachine) appendResult(r *wire.Response) {
	s.out = wire.AppendResponse(s.out, r)
}

func (s *StateMachine) encodeResults(rs []wire.Response) []byte {
	s.beginResults(len(rs))
	for i := range rs {
		s.appendResult(&rs[i])
	}
	return bytes.Clone(s.out)
}

// DecodeResults decodes Result.Data of an Update: one response per op of the
// entry, in order (a single Malformed response if the entry was undecodable).
func DecodeResults(data []byte) ([]wire.Response, error) {
	if len(data) < 1 || data[0] != resultVersion {
		return nil, wire.Errorf(wire.Malformed, "unknown result version")
	}
	r := wire.NewReader(data[1:], false)
	n := r.ArrayLen()
	if r.OK() {
		out := make([]wire.Response, n)
		for i := range out {
			if !r.Response(&out[i]) {
				break
			}
		}
		if r.OK() {
			return out, nil
		}
	}
	return decodeResultsLibrary(data[1:])
}

// decodeResultsLibrary is DecodeResults for what wire.Reader leaves
// (a Table or Signed field).
func decodeResultsLibrary(body []byte) ([]wire.Response, error) {
	rd := bytes.NewReader(body)
	dec := msgpack.NewDecoder(rd)
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 0 || n > rd.Len() {
		return nil, wire.Errorf(wire.Malformed, "bad result count %d", n)
	}
	out := make([]wire.Response, n)
	for i := range out {
		if err := out[i].DecodeMsgpack(dec); err != nil {
			return nil, wire.Errorf(wire.Malformed, "result %d: %v", i, err)
		}
	}
	return out, nil
}
