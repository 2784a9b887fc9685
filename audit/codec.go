package audit

import (
	"encoding/binary"
	"errors"

	"github.com/wardenlock/warden/wire"
)

// Applied entries' events are stored together, one value per run of
// consecutive revisions (a shard's entries the writer takes at once), in
// a small hand-written encoding (reflection-based msgpack cost the writer most of
// its time; one key per event cost pebble most of the rest). Format 2:
//
//	header: 2, uvarint count, uvarint revSpan (last rev - first rev),
//	        varint firstTime, uvarint timeSpan (last time - first time)
//	count × event:
//	        uvarint rev - previous rev (the first: rev - first rev = 0),
//	        varint time - previous time, kind, cause, mode,
//	        uvarint shared (bytes of the previous event's path it starts
//	        with), str rest of path, uvarint token, uvarint lease,
//	        str owner, bytes value (uvarint len+1, 0 = nil),
//	        uvarint version, uvarint client, uvarint seq, varint ttl
//
// The shard and the first revision are in the key. Within a shard,
// revisions grow by one per event and stamped time never goes back.
const batchFormat = 2

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// run is events of one shard with consecutive revisions, possibly of
// several applied entries, encoded as they come (add) and stored as one
// value under its first revision (appendValue). Its events are encoded
// exactly as if they had come in one entry.
type run struct {
	first, last         uint64 // revisions
	firstTime, lastTime int64
	n                   int    // events
	entries             int    // applied entries merged into it
	path                string // the last event's path (the next one is encoded against it)
	body                []byte // the encoded events, without the header
}

func (r *run) reset() {
	body := r.body[:0]
	*r = run{body: body}
}

// add appends events (in revision order, the first one right after
// r.last unless r is empty) to the run.
func (r *run) add(events []wire.Event) {
	if r.n == 0 {
		r.first, r.last, r.firstTime, r.lastTime, r.path = events[0].Rev, events[0].Rev, events[0].Time, events[0].Time, ""
	}
	b, rev, at, path := r.body, r.last, r.lastTime, r.path
	for i := range events {
		ev := &events[i]
		b = binary.AppendUvarint(b, ev.Rev-rev)
		b = binary.AppendVarint(b, ev.Time-at)
		b = append(b, byte(ev.Kind), byte(ev.Cause), byte(ev.Mode))
		shared := commonPrefix(path, ev.Path)
		b = binary.AppendUvarint(b, uint64(shared))
		b = appendStr(b, ev.Path[shared:])
		b = binary.AppendUvarint(b, ev.Token)
		b = binary.AppendUvarint(b, ev.Lease)
		b = appendStr(b, ev.Owner)
		if ev.Value == nil {
			b = append(b, 0)
		} else {
			b = binary.AppendUvarint(b, uint64(len(ev.Value))+1)
			b = append(b, ev.Value...)
		}
		b = binary.AppendUvarint(b, ev.Version)
		b = binary.AppendUvarint(b, ev.Client)
		b = binary.AppendUvarint(b, ev.Seq)
		b = binary.AppendVarint(b, ev.TTL)
		rev, at, path = ev.Rev, ev.Time, ev.Path
	}
	r.body, r.last, r.lastTime, r.path = b, rev, at, path
	r.n += len(events)
	r.entries++
}

// appendHeader appends the run's header (see batchFormat) to b.
func (r *run) appendHeader(b []byte) []byte {
	b = append(b, batchFormat)
	b = binary.AppendUvarint(b, uint64(r.n))
	b = binary.AppendUvarint(b, r.last-r.first)
	b = binary.AppendVarint(b, r.firstTime)
	return binary.AppendUvarint(b, uint64(r.lastTime-r.firstTime))
}

// maxHeader bounds appendHeader's bytes.
const maxHeader = 1 + 4*binary.MaxVarintLen64

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

var errBadEvent = errors.New("audit: undecodable event batch")

// header is what a batch's first bytes say about it.
type header struct {
	count     uint64
	firstRev  uint64 // from the key
	lastRev   uint64
	firstTime int64
	lastTime  int64
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err, r.b = errBadEvent, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err, r.b = errBadEvent, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte1() byte {
	if len(r.b) == 0 {
		r.err = errBadEvent
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) raw(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.err, r.b = errBadEvent, nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// readHeader decodes a batch's header; the reader is left at its events.
func readHeader(v []byte, firstRev uint64) (header, *reader, error) {
	r := &reader{b: v}
	if r.byte1() != batchFormat {
		return header{}, nil, errBadEvent
	}
	h := header{count: r.uvarint(), firstRev: firstRev}
	h.lastRev = firstRev + r.uvarint()
	h.firstTime = r.varint()
	h.lastTime = h.firstTime + int64(r.uvarint())
	if r.err == nil && (h.count == 0 || h.count > uint64(len(r.b))) {
		r.err = errBadEvent
	}
	return h, r, r.err
}

// decodeBatch appends the events of the batch stored under (shard,
// firstRev) to out.
func decodeBatch(out []wire.Event, shard, firstRev uint64, v []byte) ([]wire.Event, error) {
	h, r, err := readHeader(v, firstRev)
	if err != nil {
		return out, err
	}
	rev, at := h.firstRev, h.firstTime
	var path []byte
	for i := uint64(0); i < h.count && r.err == nil; i++ {
		ev := wire.Event{Shard: shard}
		rev += r.uvarint()
		at += r.varint()
		ev.Rev, ev.Time = rev, at
		ev.Kind, ev.Cause, ev.Mode = wire.EventKind(r.byte1()), wire.Cause(r.byte1()), wire.Mode(r.byte1())
		shared := r.uvarint()
		if shared > uint64(len(path)) {
			return out, errBadEvent
		}
		path = append(path[:shared], r.raw(r.uvarint())...)
		ev.Path = string(path)
		ev.Token, ev.Lease = r.uvarint(), r.uvarint()
		ev.Owner = string(r.raw(r.uvarint()))
		if n := r.uvarint(); n > 0 {
			ev.Value = append([]byte(nil), r.raw(n-1)...)
		}
		ev.Version, ev.Client, ev.Seq = r.uvarint(), r.uvarint(), r.uvarint()
		ev.TTL = r.varint()
		out = append(out, ev)
	}
	if r.err == nil && (len(r.b) != 0 || rev != h.lastRev) {
		r.err = errBadEvent
	}
	return out, r.err
}
