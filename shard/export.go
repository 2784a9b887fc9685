package shard

import (
	"context"
	"fmt"
	"sync"

	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// The move driver copies a frozen range chunk by chunk (OpExportRange), from
// a local replica of the source or, when it has none, through a node that
// has one. The range is frozen, so every linearizable read of it gives the
// same export; the replica keeps the chunks of the last move it exported,
// so a large range is read once, not once per chunk.

// exportCache holds the chunks of the last exported move.
type exportCache struct {
	mu     sync.Mutex
	move   uint64
	rg     wire.Range
	chunks [][]byte
}

func (c *exportCache) get(move uint64, rg wire.Range) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.move == move && c.rg.Start == rg.Start && c.rg.End == rg.End {
		return c.chunks
	}
	return nil
}

func (c *exportCache) put(move uint64, rg wire.Range, chunks [][]byte) {
	c.mu.Lock()
	c.move, c.rg, c.chunks = move, rg, chunks
	c.mu.Unlock()
}

// exportRange answers one chunk of move req.Gen's range, req.Ranges[0].
func (s *Shard) exportRange(req *wire.Request, done func(*wire.Response)) {
	if len(req.Ranges) != 1 || req.Gen == 0 {
		done(&wire.Response{ID: req.ID, Code: wire.InvalidArgument, Msg: "range.export names one range and a move id"})
		return
	}
	rg := req.Ranges[0]
	go func() {
		chunks := s.exports.get(req.Gen, rg)
		if chunks == nil || req.Chunk == 0 {
			// Chunk 0 always reads afresh: it is where a (re)started
			// driver begins, and the read proves the range is still
			// frozen on a replica that has applied the freeze.
			var err error
			if chunks, err = s.readExport(req.Gen, rg); err != nil {
				done(ErrorResponse(req.ID, err, false))
				return
			}
		}
		if int(req.Chunk) >= len(chunks) {
			done(&wire.Response{ID: req.ID, Code: wire.InvalidArgument,
				Msg: fmt.Sprintf("move %d has %d chunks, not %d", req.Gen, len(chunks), req.Chunk+1)})
			return
		}
		done(&wire.Response{ID: req.ID, Value: chunks[req.Chunk], Count: uint32(len(chunks))})
	}()
}

func (s *Shard) readExport(move uint64, rg wire.Range) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ReadTimeout)
	defer cancel()
	v, err := s.nh.SyncRead(ctx, s.id, statemachine.ExportQuery{Start: rg.Start, End: rg.End})
	if err != nil {
		return nil, err
	}
	x, ok := v.(*statemachine.RangeExport)
	if !ok {
		return nil, fmt.Errorf("export of move %d: unexpected %T", move, v)
	}
	chunks, err := x.Chunks(InstallChunkBytes)
	if err != nil {
		return nil, err
	}
	s.exports.put(move, rg, chunks)
	return chunks, nil
}

// InstallChunkBytes bounds one install entry of a range move, well under
// dragonboat's proposal limits and small enough not to stall the shard's
// log.
const InstallChunkBytes = 256 << 10
