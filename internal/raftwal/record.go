package raftwal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// Framing. A segment starts with its segment header record, framed with
// a 13-byte header so that the format version it names can be read before
// anything else:
//
//	[0:4]  payload length (little endian)
//	[4]    record type (recSegment)
//	[5:9]  CRC-32C of the payload
//	[9:13] CRC-32C of bytes 0..9
//
// Every other record has a 25-byte header, which binds it to its segment,
// so that a recycled segment file's old records, left behind the new ones,
// read as stale and not as part of the log (see the package doc,
// "Recovery"):
//
//	[0:4]   payload length
//	[4]     record type
//	[5:9]   CRC-32C of the payload
//	[9:17]  segment number
//	[17:21] synced: the offset in this segment up to which the log was
//	        durable (fdatasync done) when the record was written
//	[21:25] CRC-32C of bytes 0..21
//
// A header has its own checksum so that a damaged length is told apart
// from a torn tail. docs/architecture.md ("Raft log store") has the whole
// format.
const (
	segHeaderSize = 13
	headerSize    = 25
)

const (
	recSegment byte = 1 // payload: magic, format version, segment number[, end of the previous segment]
	recNode    byte = 2 // payload: one replica's update (nodeRec)
	recRemove  byte = 3 // payload: shard, replica: forget all of that replica's data
)

const (
	segmentMagic  = "WDNWAL"
	formatVersion = 2
)

// nodeRec flags: which parts a node record carries.
const (
	fBootstrap     = 1 << 0
	fState         = 1 << 1
	fSnapshot      = 1 << 2
	fSnapshotReset = 1 << 3 // a snapshot received from the leader: entries before it are gone
	fCompact       = 1 << 4
	fEntries       = 1 << 5
	fEntriesAll    = 1 << 6 // the entries replace the replica's whole log (rotation copies)
	fReplace       = 1 << 7 // the record replaces everything stored for the replica (ImportSnapshot)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt is wrapped by every decoding error.
var errCorrupt = errors.New("raftwal: corrupt record")

// nodeRec is one replica's part of a write, decoded.
type nodeRec struct {
	shard, replica uint64
	flags          byte
	bootstrap      pb.Bootstrap
	state          pb.State
	snapshot       pb.Snapshot
	compactTo      uint64
	// entries: indexes first..last, encoded in payload[entOff:entOff+entLen]
	entFirst, entLast uint64
	entOff, entLen    int
}

// appendRecord appends a record to buf; its segment number and
// synced offset are set by stampRecords once the segment it goes to is
// known.
func appendRecord(buf []byte, typ byte, payload []byte) []byte {
	buf, start := beginRecord(buf)
	buf = append(buf, payload...)
	finishRecord(buf, start, typ)
	return buf
}

// beginRecord reserves a header in buf; finishRecord fills it once the
// payload (everything after the header) has been appended.
func beginRecord(buf []byte) ([]byte, int) {
	start := len(buf)
	var h [headerSize]byte
	return append(buf, h[:]...), start
}

func finishRecord(buf []byte, start int, typ byte) {
	h := buf[start : start+headerSize]
	payload := buf[start+headerSize:]
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	h[4] = typ
	binary.LittleEndian.PutUint32(h[5:9], crc32.Checksum(payload, castagnoli))
}

// stampRecords sets the segment number and synced offset of every
// record in buf (whole records) and seals their headers.
func stampRecords(buf []byte, seg uint64, synced int64) {
	att := uint32(min(synced, math.MaxUint32)) // claiming less is safe
	for off := 0; off < len(buf); {
		h := buf[off : off+headerSize]
		binary.LittleEndian.PutUint64(h[9:17], seg)
		binary.LittleEndian.PutUint32(h[17:21], att)
		binary.LittleEndian.PutUint32(h[21:25], crc32.Checksum(h[:21], castagnoli))
		off += headerSize + int(binary.LittleEndian.Uint32(h[0:4]))
	}
}

// appendSegmentRecord appends the segment header record. prevEnd is the
// length of segment num-1's records (0 for the first segment).
func appendSegmentRecord(buf []byte, num uint64, prevEnd int64) []byte {
	p := append([]byte(segmentMagic), formatVersion)
	p = binary.AppendUvarint(p, num)
	p = binary.AppendUvarint(p, uint64(prevEnd))
	var h [segHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(p)))
	h[4] = recSegment
	binary.LittleEndian.PutUint32(h[5:9], crc32.Checksum(p, castagnoli))
	binary.LittleEndian.PutUint32(h[9:13], crc32.Checksum(h[:9], castagnoli))
	buf = append(buf, h[:]...)
	return append(buf, p...)
}

// header is a record header, decoded.
type header struct {
	length  uint32
	typ     byte
	sum     uint32
	seg     uint64 // records after the segment header
	synced  uint32 // records after the segment header
	validHd bool
}

// parseHeader decodes a header of size hsize (segHeaderSize or
// headerSize) at the start of b.
func parseHeader(b []byte, hsize int) header {
	h := header{
		length: binary.LittleEndian.Uint32(b[0:4]),
		typ:    b[4],
		sum:    binary.LittleEndian.Uint32(b[5:9]),
	}
	if hsize == segHeaderSize {
		h.validHd = crc32.Checksum(b[:9], castagnoli) == binary.LittleEndian.Uint32(b[9:13])
		return h
	}
	h.seg = binary.LittleEndian.Uint64(b[9:17])
	h.synced = binary.LittleEndian.Uint32(b[17:21])
	h.validHd = crc32.Checksum(b[:21], castagnoli) == binary.LittleEndian.Uint32(b[21:25])
	return h
}

// segHeader is a segment header record's payload, decoded.
type segHeader struct {
	num     uint64
	prevEnd int64 // length of segment num-1's records; 0 for the first
}

func parseSegmentPayload(p []byte) (segHeader, error) {
	if len(p) < len(segmentMagic)+1 || string(p[:len(segmentMagic)]) != segmentMagic {
		return segHeader{}, fmt.Errorf("%w: bad segment magic", errCorrupt)
	}
	if v := p[len(segmentMagic)]; v != formatVersion {
		return segHeader{}, fmt.Errorf("raftwal: segment format version %d, this build reads %d", v, formatVersion)
	}
	d := decoder{b: p, off: len(segmentMagic) + 1}
	sh := segHeader{num: d.uvarint(), prevEnd: int64(d.uvarint())}
	if d.err != nil || d.off != len(p) || sh.num == 0 {
		return sh, fmt.Errorf("%w: bad segment header", errCorrupt)
	}
	return sh, nil
}

// appendNodePayload encodes r (without the entries part) and then the
// entries ents, which must be consecutive. It returns the buffer and the
// offset of the entries blob within it (relative to the start of buf).
func appendNodePayload(buf []byte, r *nodeRec, ents []pb.Entry) ([]byte, int, error) {
	var err error
	buf = binary.AppendUvarint(buf, r.shard)
	buf = binary.AppendUvarint(buf, r.replica)
	flags := r.flags
	if len(ents) > 0 {
		flags |= fEntries
	} else {
		flags &^= fEntries | fEntriesAll
	}
	buf = append(buf, flags)
	if flags&fBootstrap != 0 {
		if buf, err = appendMarshaled(buf, &r.bootstrap); err != nil {
			return nil, 0, err
		}
	}
	if flags&fState != 0 {
		buf = binary.AppendUvarint(buf, r.state.Term)
		buf = binary.AppendUvarint(buf, r.state.Vote)
		buf = binary.AppendUvarint(buf, r.state.Commit)
	}
	if flags&fSnapshot != 0 {
		if buf, err = appendMarshaled(buf, &r.snapshot); err != nil {
			return nil, 0, err
		}
	}
	if flags&fCompact != 0 {
		buf = binary.AppendUvarint(buf, r.compactTo)
	}
	entOff := -1
	if flags&fEntries != 0 {
		for i := 1; i < len(ents); i++ {
			if ents[i].Index != ents[i-1].Index+1 {
				return nil, 0, fmt.Errorf("raftwal: entries to save are not consecutive (%d after %d)",
					ents[i].Index, ents[i-1].Index)
			}
		}
		buf = binary.AppendUvarint(buf, uint64(len(ents)))
		buf = binary.AppendUvarint(buf, ents[0].Index)
		entOff = len(buf)
		for i := range ents {
			sz := ents[i].Size()
			buf = binary.AppendUvarint(buf, uint64(sz))
			n := len(buf)
			buf = append(buf, make([]byte, sz)...)
			if _, err := ents[i].MarshalTo(buf[n:]); err != nil {
				return nil, 0, err
			}
		}
	}
	return buf, entOff, nil
}

// decodeNode decodes a node record payload. Entries are not unmarshalled;
// their first and last index are read from the blob's first entry and count.
func decodeNode(p []byte) (nodeRec, error) {
	var r nodeRec
	d := decoder{b: p}
	r.shard = d.uvarint()
	r.replica = d.uvarint()
	r.flags = d.byte()
	if r.flags&fBootstrap != 0 {
		if err := r.bootstrap.Unmarshal(d.bytes()); err != nil && d.err == nil {
			d.err = err
		}
	}
	if r.flags&fState != 0 {
		r.state.Term = d.uvarint()
		r.state.Vote = d.uvarint()
		r.state.Commit = d.uvarint()
	}
	if r.flags&fSnapshot != 0 {
		if err := r.snapshot.Unmarshal(d.bytes()); err != nil && d.err == nil {
			d.err = err
		}
	}
	if r.flags&fCompact != 0 {
		r.compactTo = d.uvarint()
	}
	if r.flags&fEntries != 0 {
		n := d.uvarint()
		first := d.uvarint()
		r.entOff = d.off
		if n == 0 || first == 0 || d.err != nil {
			return r, fmt.Errorf("%w: empty entry list", errCorrupt)
		}
		r.entFirst, r.entLast = first, first+n-1
		r.entLen = len(p) - d.off
		d.off = len(p)
	}
	if d.err != nil {
		return r, fmt.Errorf("%w: node record: %v", errCorrupt, d.err)
	}
	if d.off != len(p) {
		return r, fmt.Errorf("%w: %d trailing bytes in node record", errCorrupt, len(p)-d.off)
	}
	return r, nil
}

// decodeEntries appends the entries of blob (which starts at index base)
// with indexes in [low, high) to ents, stopping once size exceeds maxSize.
func decodeEntries(blob []byte, base, low, high uint64, ents []pb.Entry,
	size, maxSize uint64) ([]pb.Entry, uint64, bool, error) {
	d := decoder{b: blob}
	for idx := base; d.off < len(blob) && idx < high; idx++ {
		b := d.bytes()
		if d.err != nil {
			return ents, size, false, fmt.Errorf("%w: entry: %v", errCorrupt, d.err)
		}
		if idx < low {
			continue
		}
		var e pb.Entry
		if err := e.Unmarshal(b); err != nil {
			return ents, size, false, fmt.Errorf("%w: entry: %v", errCorrupt, err)
		}
		if e.Index != idx {
			return ents, size, false, fmt.Errorf("%w: entry %d where %d was expected", errCorrupt, e.Index, idx)
		}
		size += uint64(e.SizeUpperLimit())
		ents = append(ents, e)
		if size > maxSize {
			return ents, size, true, nil
		}
	}
	return ents, size, false, nil
}

func removePayload(shard, replica uint64) []byte {
	b := binary.AppendUvarint(nil, shard)
	return binary.AppendUvarint(b, replica)
}

func decodeRemove(p []byte) (uint64, uint64, error) {
	d := decoder{b: p}
	s, r := d.uvarint(), d.uvarint()
	if d.err != nil || d.off != len(p) {
		return 0, 0, fmt.Errorf("%w: remove record", errCorrupt)
	}
	return s, r, nil
}

type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.err = errors.New("short record")
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.err = errors.New("length past the end of the record")
		return nil
	}
	b := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return b
}

func crc32Castagnoli(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// appendMarshaled appends m's encoding to buf, length first.
func appendMarshaled(buf []byte, m interface{ Marshal() ([]byte, error) }) ([]byte, error) {
	b, err := m.Marshal()
	if err != nil {
		return buf, err
	}
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	return append(buf, b...), nil
}
