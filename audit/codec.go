package audit

import (
	"encoding/binary"
	"errors"

	"github.com/wardenlock/warden/wire"
)

// Events are stored in a small hand-written encoding (reflection-based
// msgpack cost the writer most of its time). Format 1:
//
//	1, uvarint rev, kind, cause, str path, mode, uvarint token, uvarint lease,
//	str owner, bytes value (uvarint len+1, 0 = nil), uvarint version,
//	uvarint client, uvarint seq, uvarint shard, varint time, varint ttl
const eventFormat = 1

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendEvent(b []byte, ev *wire.Event) []byte {
	b = append(b, eventFormat)
	b = binary.AppendUvarint(b, ev.Rev)
	b = append(b, byte(ev.Kind), byte(ev.Cause))
	b = appendStr(b, ev.Path)
	b = append(b, byte(ev.Mode))
	b = binary.AppendUvarint(b, ev.Token)
	b = binary.AppendUvarint(b, ev.Lease)
	b = appendStr(b, ev.Owner)
	if ev.Value == nil {
		b = binary.AppendUvarint(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(ev.Value))+1)
		b = append(b, ev.Value...)
	}
	for _, v := range []uint64{ev.Version, ev.Client, ev.Seq, ev.Shard} {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendVarint(b, ev.Time)
	return binary.AppendVarint(b, ev.TTL)
}

var errBadEvent = errors.New("audit: undecodable event")

type eventReader struct {
	b   []byte
	err error
}

func (r *eventReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err, r.b = errBadEvent, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *eventReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err, r.b = errBadEvent, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *eventReader) byte1() byte {
	if len(r.b) == 0 {
		r.err = errBadEvent
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *eventReader) raw(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.err, r.b = errBadEvent, nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func decodeEvent(b []byte) (wire.Event, error) {
	r := &eventReader{b: b}
	var ev wire.Event
	if r.byte1() != eventFormat {
		return ev, errBadEvent
	}
	ev.Rev = r.uvarint()
	ev.Kind, ev.Cause = wire.EventKind(r.byte1()), wire.Cause(r.byte1())
	ev.Path = string(r.raw(r.uvarint()))
	ev.Mode = wire.Mode(r.byte1())
	ev.Token, ev.Lease = r.uvarint(), r.uvarint()
	ev.Owner = string(r.raw(r.uvarint()))
	if n := r.uvarint(); n > 0 {
		ev.Value = append([]byte(nil), r.raw(n-1)...)
	}
	ev.Version, ev.Client, ev.Seq, ev.Shard = r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
	ev.Time, ev.TTL = r.varint(), r.varint()
	if r.err == nil && len(r.b) != 0 {
		r.err = errBadEvent
	}
	return ev, r.err
}
