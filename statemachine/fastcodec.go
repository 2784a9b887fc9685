package statemachine

import (
	"github.com/wardenlock/warden/wire"
)

// The hot path of Update reads entries with wire.Reader and writes results
// with wire.AppendResponse: no reflection, one string allocation per entry.
// Both give exactly what the msgpack library would (wire's tests compare
// them); an entry the Reader leaves (an unusual encoding, an unknown
// field) is decoded again by the library, errors included.
//
// Strings of decoded requests are cut from one string copy of the whole
// entry; code that keeps a request string beyond the entry clones it.

// fastDecode fills s.reqs from an entry's body (after the two header
// bytes). It reports false, having decided nothing, when the library must
// decode the entry instead.
func (s *StateMachine) fastDecode(body []byte) (int64, bool) {
	r := wire.NewReader(body, true)
	now := r.Int()
	n := r.ArrayLen()
	if !r.OK() {
		return 0, false
	}
	if cap(s.reqs) < n {
		s.reqs = make([]wire.Request, n)
	}
	s.reqs = s.reqs[:n]
	for i := range s.reqs {
		if !r.Request(&s.reqs[i]) {
			break
		}
	}
	if !r.OK() || r.Len() != 0 {
		s.reqs = s.reqs[:0]
		return 0, false
	}
	return now, true
}
