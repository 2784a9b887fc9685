package placement

import (
	"encoding/binary"
	"hash/fnv"
	"io"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/wardenlock/warden/wire"
)

// metaCommand is one change to the table.
type metaCommand struct {
	Kind  string        `msgpack:"k"` // "init", "node"; nodes.go adds its own
	Table *Table        `msgpack:"t,omitempty"`
	Node  *Node         `msgpack:"n,omitempty"`
	Nodes *nodeCommand  `msgpack:"nc,omitempty"` // node and replica changes (nodes.go)
	Range *RangeCommand `msgpack:"r,omitempty"`  // Kind "range" (ranges.go)
	Shard *ShardCommand `msgpack:"s,omitempty"`  // Kind "shard" (lifecycle.go)
}

// TableQuery (Lookup) returns a *Table copy.
type TableQuery struct{}

// Meta is the meta group's state machine: the table, nothing else. It is
// small and changes rarely, so the simple IStateMachine fits.
type Meta struct {
	table *Table // nil until initialised
}

// Result is what applying a command gives: Value, and Data when the
// command was refused (its reason).
type Result struct {
	Value uint64
	Data  []byte
}

// NewMeta makes an empty meta state machine. The node's Raft host runs it
// as the meta group's replica (control/meta.go adapts it to dragonboat).
func NewMeta() *Meta { return &Meta{} }

// InitCommand encodes "initialise the table if empty".
func InitCommand(t *Table) ([]byte, error) {
	return msgpack.Marshal(&metaCommand{Kind: "init", Table: t})
}

// NodeCommand encodes "register or update a node".
func NodeCommand(n Node) ([]byte, error) {
	return msgpack.Marshal(&metaCommand{Kind: "node", Node: &n})
}

// Apply applies one command. Result.Value is 1 when it changed the table.
func (m *Meta) Apply(cmd []byte) Result {
	var c metaCommand
	if err := msgpack.Unmarshal(cmd, &c); err != nil {
		return Result{Data: []byte(err.Error())}
	}
	if c.Nodes != nil {
		return m.applyNodes(c.Nodes)
	}
	switch c.Kind {
	case "init":
		if m.table != nil || c.Table == nil {
			return Result{}
		}
		m.table = c.Table.Clone()
		return Result{Value: 1}
	case "node":
		if m.table == nil || c.Node == nil {
			return Result{}
		}
		for i, n := range m.table.Nodes {
			if n.ID == c.Node.ID {
				m.table.Nodes[i] = *c.Node
				return Result{Value: 1}
			}
		}
		m.table.Nodes = append(m.table.Nodes, *c.Node)
		return Result{Value: 1}
	case "range":
		return m.applyRange(c.Range)
	case "shard":
		return m.applyShard(c.Shard)
	}
	return Result{}
}

// Lookup answers TableQuery.
func (m *Meta) Lookup(q interface{}) (interface{}, error) {
	if _, ok := q.(TableQuery); !ok {
		return nil, wire.Errorf(wire.UnknownOp, "meta: unknown query %T", q)
	}
	if m.table == nil {
		return (*Table)(nil), nil
	}
	return m.table.Clone(), nil
}

// SaveSnapshot writes the table.
func (m *Meta) SaveSnapshot(w io.Writer) error {
	b, err := msgpack.Marshal(m.table)
	if err != nil {
		return err
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// RecoverFromSnapshot reads what SaveSnapshot wrote.
func (m *Meta) RecoverFromSnapshot(r io.Reader) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	b := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	var t *Table
	if err := msgpack.Unmarshal(b, &t); err != nil {
		return err
	}
	m.table = t
	return nil
}

// GetHash hashes the encoded table.
func (m *Meta) GetHash() (uint64, error) {
	b, err := msgpack.Marshal(m.table)
	if err != nil {
		return 0, err
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64(), nil
}
