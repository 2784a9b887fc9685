package chaos

import (
	"bufio"
	"encoding/binary"
	"io"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// Dragonboat's TCP transport opens one-way connections: the dialer sends
// message batches (or snapshot chunks) and the receiver only reads. Every
// frame is a 2-byte magic number, an 18-byte header whose bytes 2..10 hold
// the payload size, then the payload: a MessageBatch (method 100) that names
// the sender's Raft address, or a Chunk (method 200) that names the sending
// replica. The inbound proxy of each node reads the first frame to learn
// which node dialled, so one proxy per node can still cut single directed
// links. (Per-node member lists naming per-link proxies do not work:
// dragonboat records each batch's source address and panics when it differs
// from the address in its own member list.)

const (
	raftMagicLen  = 2
	raftHeaderLen = 18
	raftBatch     = 100
	raftChunk     = 200
	maxFirstFrame = 64 << 20
)

// readRaftSource reads the first frame from r and returns it with the sender
// it names: a Raft address (batches) or a replica id (chunks). ok is false
// when the frame cannot be read or decoded.
func readRaftSource(r io.Reader) (frame []byte, addr string, replica uint64, ok bool) {
	head := make([]byte, raftMagicLen+raftHeaderLen)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, "", 0, false
	}
	method := binary.BigEndian.Uint16(head[raftMagicLen:])
	size := binary.BigEndian.Uint64(head[raftMagicLen+2:])
	if size == 0 || size > maxFirstFrame {
		return nil, "", 0, false
	}
	frame = make([]byte, len(head)+int(size))
	copy(frame, head)
	if _, err := io.ReadFull(r, frame[len(head):]); err != nil {
		return nil, "", 0, false
	}
	payload := frame[len(head):]
	switch method {
	case raftBatch:
		var mb pb.MessageBatch
		if mb.Unmarshal(payload) != nil {
			return nil, "", 0, false
		}
		return frame, mb.SourceAddress, 0, true
	case raftChunk:
		var c pb.Chunk
		if c.Unmarshal(payload) != nil {
			return nil, "", 0, false
		}
		return frame, "", c.From, true
	}
	return nil, "", 0, false
}

// raftClassifier returns the classifier of node `to`'s inbound proxy: the
// link from whichever node dialled. byAddr maps Raft identity addresses to
// node indexes.
func raftClassifier(links [][]*Link, to int, byAddr map[string]int) Classifier {
	return func(br *bufio.Reader) (*Link, []byte) {
		frame, addr, replica, ok := readRaftSource(br)
		if !ok {
			return nil, nil
		}
		from, known := byAddr[addr]
		if addr == "" {
			from, known = int(replica)-1, replica >= 1 && int(replica) <= len(links)
		}
		if !known || from == to {
			return nil, nil
		}
		return links[from][to], frame
	}
}
