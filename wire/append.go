package wire

import (
	"encoding/binary"
	"math"
)

// Hand-written, append-style encoders for the hot paths. They write exactly
// the bytes that EncodeMsgpack writes through a compact-ints msgpack
// Encoder (fastcodec_test.go compares the two on randomized values), so
// frames, log entries and snapshots written by either are read by both.
// The two fields without a hand-written form (Response.Table and
// Response.Signed, answers to OpRanges and FlagSigned) make AppendResponse
// use the library for that response.

// AppendUint appends v as the shortest msgpack unsigned integer.
func AppendUint(b []byte, v uint64) []byte {
	switch {
	case v <= math.MaxInt8:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

// AppendInt appends v as msgpack's Encoder.EncodeInt does.
func AppendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return AppendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func appendLen(b []byte, n int, fix0 byte, fixLimit int, c8, c16, c32 byte) []byte {
	switch {
	case n < fixLimit:
		return append(b, fix0|byte(n))
	case c8 != 0 && n <= math.MaxUint8:
		return append(b, c8, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, c16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, c32), uint32(n))
}

// AppendArrayLen appends an array header of n elements.
func AppendArrayLen(b []byte, n int) []byte { return appendLen(b, n, 0x90, 16, 0, 0xdc, 0xdd) }

func appendMapLen(b []byte, n int) []byte { return appendLen(b, n, 0x80, 16, 0, 0xde, 0xdf) }

func appendString(b []byte, s string) []byte {
	return append(appendLen(b, len(s), 0xa0, 32, 0xd9, 0xda, 0xdb), s...)
}

// appendBytes writes nil as msgpack nil, as EncodeBytes does.
func appendBytes(b []byte, v []byte) []byte {
	if v == nil {
		return append(b, 0xc0)
	}
	return append(appendLen(b, len(v), 0, 0, 0xc4, 0xc5, 0xc6), v...)
}

// Field keys are all below 128: one byte each.

func appendUintField(b []byte, key byte, v uint64) []byte {
	if v == 0 {
		return b
	}
	return AppendUint(append(b, key), v)
}

func appendIntField(b []byte, key byte, v int64) []byte {
	if v == 0 {
		return b
	}
	return AppendInt(append(b, key), v)
}

func appendStringField(b []byte, key byte, v string) []byte {
	if v == "" {
		return b
	}
	return appendString(append(b, key), v)
}

func appendBytesField(b []byte, key byte, v []byte) []byte {
	if v == nil {
		return b
	}
	return appendBytes(append(b, key), v)
}

func appendUintsField(b []byte, key byte, v []uint64) []byte {
	if len(v) == 0 {
		return b
	}
	b = AppendArrayLen(append(b, key), len(v))
	for _, x := range v {
		b = AppendUint(b, x)
	}
	return b
}

func appendIntsField(b []byte, key byte, v []int64) []byte {
	if len(v) == 0 {
		return b
	}
	b = AppendArrayLen(append(b, key), len(v))
	for _, x := range v {
		b = AppendInt(b, x)
	}
	return b
}

func appendStringsField(b []byte, key byte, v []string) []byte {
	if len(v) == 0 {
		return b
	}
	b = AppendArrayLen(append(b, key), len(v))
	for _, x := range v {
		b = appendString(b, x)
	}
	return b
}

func appendRangesField(b []byte, key byte, v []Range) []byte {
	if len(v) == 0 {
		return b
	}
	b = AppendArrayLen(append(b, key), len(v))
	for i := range v {
		r := &v[i]
		b = append(b, 0x94)
		b = appendString(b, r.Start)
		b = appendString(b, r.End)
		b = AppendUint(b, r.Shard)
		b = AppendUint(b, r.Gen)
	}
	return b
}

func appendShardRevsField(b []byte, key byte, v []ShardRev) []byte {
	if len(v) == 0 {
		return b
	}
	b = AppendArrayLen(append(b, key), len(v))
	for _, x := range v {
		b = append(b, 0x92)
		b = AppendUint(b, x.Shard)
		b = AppendUint(b, x.Rev)
	}
	return b
}

// fieldCount sums the common fields without branches, as
// Response.fieldCount does; the lists are looked at only if any is set.
func (r *Request) fieldCount() int {
	n := b2i(r.ID != 0) + b2i(r.Op != 0) + b2i(r.Path != "") + b2i(r.Mode != 0) + b2i(r.Lease != 0) +
		b2i(r.TTL != 0) + b2i(r.Wait != 0) + b2i(r.Token != 0) + b2i(r.Owner != "") + b2i(r.Value != nil) +
		b2i(r.Version != 0) + b2i(r.Rev != 0) + b2i(r.Client != 0) + b2i(r.Seq != 0) + b2i(r.AckSeq != 0) +
		b2i(r.Gen != 0) + b2i(r.Flags != 0) + b2i(r.Limit != 0) + b2i(r.Stream != 0) + b2i(r.Auth != "") +
		b2i(r.Shard != 0) + b2i(r.Term != 0) + b2i(r.Chunk != 0) + b2i(r.ToReplica != 0) +
		b2i(r.Identity != "") + b2i(r.LeaseKey != 0) + b2i(r.Grace != 0) + b2i(r.Target != "") +
		b2i(r.Permits != 0) + b2i(r.LockDelay != 0) + b2i(r.Priority != 0) + b2i(r.Trace != "")
	if len(r.Leases)|len(r.Ranges)|len(r.Remaining)|len(r.Paths)|len(r.Position) != 0 {
		n += b2i(len(r.Leases) > 0) + b2i(len(r.Ranges) > 0) + b2i(len(r.Remaining) > 0) + b2i(len(r.Paths) > 0) +
			b2i(len(r.Position) > 0)
	}
	return n
}

// AppendRequest appends r as one msgpack value, byte for byte what
// EncodeMsgpack writes, without allocating beyond growing b.
func AppendRequest(b []byte, r *Request) []byte {
	b = appendMapLen(b, r.fieldCount())
	b = appendUintField(b, reqID, r.ID)
	b = appendUintField(b, reqOp, uint64(r.Op))
	b = appendStringField(b, reqPath, r.Path)
	b = appendUintField(b, reqMode, uint64(r.Mode))
	b = appendUintField(b, reqLease, r.Lease)
	b = appendIntField(b, reqTTL, r.TTL)
	b = appendIntField(b, reqWait, r.Wait)
	b = appendUintField(b, reqToken, r.Token)
	b = appendStringField(b, reqOwner, r.Owner)
	b = appendBytesField(b, reqValue, r.Value)
	b = appendUintField(b, reqVersion, r.Version)
	b = appendUintField(b, reqRev, r.Rev)
	b = appendUintField(b, reqClient, r.Client)
	b = appendUintField(b, reqSeq, r.Seq)
	b = appendUintField(b, reqAckSeq, r.AckSeq)
	b = appendUintField(b, reqGen, r.Gen)
	b = appendUintField(b, reqFlags, uint64(r.Flags))
	b = appendUintField(b, reqLimit, uint64(r.Limit))
	b = appendUintField(b, reqStream, r.Stream)
	b = appendStringField(b, reqAuth, r.Auth)
	b = appendUintsField(b, reqLeases, r.Leases)
	b = appendRangesField(b, reqRanges, r.Ranges)
	b = appendUintField(b, reqShard, r.Shard)
	b = appendUintField(b, reqTerm, r.Term)
	b = appendIntsField(b, reqRemaining, r.Remaining)
	b = appendUintField(b, reqChunk, uint64(r.Chunk))
	b = appendUintField(b, reqToReplica, r.ToReplica)
	b = appendStringField(b, reqIdentity, r.Identity)
	b = appendUintField(b, reqLeaseKey, r.LeaseKey)
	b = appendStringsField(b, reqPaths, r.Paths)
	b = appendIntField(b, reqGrace, r.Grace)
	b = appendStringField(b, reqTarget, r.Target)
	b = appendUintField(b, reqPermits, uint64(r.Permits))
	b = appendIntField(b, reqLockDelay, r.LockDelay)
	b = appendIntField(b, reqPriority, r.Priority)
	b = appendShardRevsField(b, reqPosition, r.Position)
	b = appendStringField(b, reqTrace, r.Trace)
	return b
}

// hasHandWrittenForm: responses AppendResponse writes itself.
func (r *Response) hasHandWrittenForm() bool { return r.Table == nil && r.Signed == nil }

// fieldCount runs for every answer of every op on every replica: the
// common fields are summed without branches and the lists, rare in
// answers to log ops, are looked at one by one only if any is set.
func (r *Response) fieldCount() int {
	n := b2i(r.ID != 0) + b2i(r.Code != 0) + b2i(r.Msg != "") + b2i(r.Token != 0) + b2i(r.Lease != 0) +
		b2i(r.TTL != 0) + b2i(r.Rev != 0) + b2i(r.Value != nil) + b2i(r.Version != 0) + b2i(r.Mode != 0) +
		b2i(r.Count != 0) + b2i(r.Owner != "") + b2i(r.Path != "") + b2i(r.Stream != 0) +
		b2i(r.DelayUntil != 0) + b2i(r.RevokeAt != 0) + b2i(r.Permits != 0)
	if len(r.Holders)|len(r.Waiters)|len(r.KVs)|len(r.Events)|len(r.Leases)|len(r.Ranges)|len(r.Grants)|
		len(r.Denied)|len(r.Position) != 0 || r.Hint != nil || r.Table != nil || r.Signed != nil {
		n += b2i(r.Hint != nil) + b2i(len(r.Holders) > 0) + b2i(len(r.Waiters) > 0) + b2i(len(r.KVs) > 0) +
			b2i(len(r.Events) > 0) + b2i(len(r.Leases) > 0) + b2i(len(r.Ranges) > 0) + b2i(len(r.Grants) > 0) +
			b2i(r.Table != nil) + b2i(r.Signed != nil) + b2i(len(r.Denied) > 0) + b2i(len(r.Position) > 0)
	}
	return n
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// AppendResponse appends r as one msgpack value, byte for byte what
// EncodeMsgpack writes. Responses with a Table or Signed go through the
// library (allocating); every other response is written by hand.
func AppendResponse(b []byte, r *Response) []byte {
	if !r.hasHandWrittenForm() {
		c := *r // the copy, not r, escapes into the library's interface
		out, err := marshal(&c)
		if err != nil {
			panic(err) // unreachable: encoding into a bytes.Buffer does not fail
		}
		return append(b, out...)
	}
	b = appendMapLen(b, r.fieldCount())
	b = appendUintField(b, respID, r.ID)
	b = appendUintField(b, respCode, uint64(r.Code))
	b = appendStringField(b, respMsg, r.Msg)
	b = appendUintField(b, respToken, r.Token)
	b = appendUintField(b, respLease, r.Lease)
	b = appendIntField(b, respTTL, r.TTL)
	b = appendUintField(b, respRev, r.Rev)
	b = appendBytesField(b, respValue, r.Value)
	b = appendUintField(b, respVersion, r.Version)
	b = appendUintField(b, respMode, uint64(r.Mode))
	b = appendUintField(b, respCount, uint64(r.Count))
	b = appendStringField(b, respOwner, r.Owner)
	b = appendStringField(b, respPath, r.Path)
	b = appendUintField(b, respStream, r.Stream)
	if r.Hint != nil {
		b = appendHint(append(b, respHint), r.Hint)
	}
	if len(r.Holders) > 0 {
		b = AppendArrayLen(append(b, respHolders), len(r.Holders))
		for i := range r.Holders {
			h := &r.Holders[i]
			b = append(b, 0x97)
			b = appendString(b, h.Owner)
			b = AppendUint(b, h.Lease)
			b = AppendUint(b, uint64(h.Mode))
			b = AppendUint(b, h.Token)
			b = AppendUint(b, uint64(h.Count))
			b = appendString(b, h.Path)
			b = AppendInt(b, h.TTL)
		}
	}
	if len(r.Waiters) > 0 {
		b = AppendArrayLen(append(b, respWaiters), len(r.Waiters))
		for i := range r.Waiters {
			w := &r.Waiters[i]
			b = append(b, 0x96)
			b = appendString(b, w.Owner)
			b = AppendUint(b, w.Lease)
			b = AppendUint(b, uint64(w.Mode))
			b = AppendUint(b, w.Client)
			b = AppendUint(b, w.Seq)
			b = appendString(b, w.Path)
		}
	}
	if len(r.KVs) > 0 {
		b = AppendArrayLen(append(b, respKVs), len(r.KVs))
		for i := range r.KVs {
			kv := &r.KVs[i]
			b = append(b, 0x96)
			b = appendString(b, kv.Key)
			b = appendBytes(b, kv.Value)
			b = AppendUint(b, kv.Version)
			b = AppendUint(b, kv.Lease)
			b = AppendUint(b, kv.CreateRev)
			b = AppendUint(b, kv.ModRev)
		}
	}
	if len(r.Events) > 0 {
		b = AppendArrayLen(append(b, respEvents), len(r.Events))
		for i := range r.Events {
			b = appendEvent(b, &r.Events[i])
		}
	}
	b = appendUintsField(b, respLeases, r.Leases)
	b = appendRangesField(b, respRanges, r.Ranges)
	if len(r.Grants) > 0 {
		b = AppendArrayLen(append(b, respGrants), len(r.Grants))
		for i := range r.Grants {
			g := &r.Grants[i]
			b = append(b, 0x96)
			b = AppendUint(b, g.Client)
			b = AppendUint(b, g.Seq)
			b = appendString(b, g.Path)
			b = AppendUint(b, g.Token)
			b = AppendUint(b, g.Lease)
			b = AppendUint(b, uint64(g.Mode))
		}
	}
	b = appendUintsField(b, respDenied, r.Denied)
	b = appendIntField(b, respDelayUntil, r.DelayUntil)
	b = appendIntField(b, respRevokeAt, r.RevokeAt)
	b = appendUintField(b, respPermits, uint64(r.Permits))
	b = appendShardRevsField(b, respPosition, r.Position)
	return b
}

// appendHint writes the map form the library gives Hint's struct tags:
// "s", "g", and "l" unless empty.
func appendHint(b []byte, h *Hint) []byte {
	if h.Leader == "" {
		b = append(b, 0x82)
	} else {
		b = append(b, 0x83)
	}
	b = AppendUint(append(b, 0xa1, 's'), h.Shard)
	b = AppendUint(append(b, 0xa1, 'g'), h.Gen)
	if h.Leader != "" {
		b = appendString(append(b, 0xa1, 'l'), h.Leader)
	}
	return b
}

func appendEvent(b []byte, e *Event) []byte {
	b = append(b, 0x9f) // as_array, fifteen fields
	b = AppendUint(b, e.Rev)
	b = AppendUint(b, uint64(e.Kind))
	b = AppendUint(b, uint64(e.Cause))
	b = appendString(b, e.Path)
	b = AppendUint(b, uint64(e.Mode))
	b = AppendUint(b, e.Token)
	b = AppendUint(b, e.Lease)
	b = appendString(b, e.Owner)
	b = appendBytes(b, e.Value)
	b = AppendUint(b, e.Version)
	b = AppendUint(b, e.Client)
	b = AppendUint(b, e.Seq)
	b = AppendUint(b, e.Shard)
	b = AppendInt(b, e.Time)
	b = AppendInt(b, e.TTL)
	return b
}
