package chaos

import (
	"bufio"

	"github.com/wardenlock/warden/raftnode"
)

// Warden's Raft transport (raftnode/transport.go) opens one-way connections:
// the dialer sends an 8-byte preamble, then frames of message batches (which
// name the sender's Raft address) or snapshot chunks (which name the sending
// replica); the receiver only reads. The inbound proxy of each node reads the
// first frame to learn which node dialled, so one proxy per node can still
// cut single directed links. (Per-node member lists naming per-link proxies
// do not work: dragonboat records each batch's source address and panics
// when it differs from the address in its own member list.)

// readRaftSource reads the preamble and first frame from r and returns them
// with the sender they name: a Raft address (batches) or a replica id
// (chunks). ok is false when the frame cannot be read or decoded.
func readRaftSource(br *bufio.Reader) (frame []byte, addr string, replica uint64, ok bool) {
	return raftnode.ReadRaftSource(br)
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
			node := replica & 0xffffffff // a replica id carries its node in the low 32 bits
			from, known = int(node)-1, node >= 1 && int(node) <= len(links)
		}
		if !known || from == to {
			return nil, nil
		}
		return links[from][to], frame
	}
}
