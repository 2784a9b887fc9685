package client

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wardenlock/warden/wire"
)

// Position is where a prefix watch stands: for each shard, the last
// revision it has delivered, or the one it started after. A watch resumed
// from it (WithWatchPosition) delivers every later event of the subtree
// exactly once, on every shard, as long as each shard still retains the
// revisions after its entry; a shard the position does not name is
// followed from its first event.
//
// Its text form (String, ParsePosition) is "shard:rev" pairs joined by
// commas, in shard order: "2:1041,3:977,4:1200".
type Position []wire.ShardRev

// CompactedError ends a watch whose position is older than what a shard
// retains: it names the shard and its oldest retained revision, and matches
// ErrCompacted.
type CompactedError = wire.CompactedError

// Rev returns the position's revision of shard, false when it names none.
func (p Position) Rev(shard uint64) (uint64, bool) {
	for _, e := range p {
		if e.Shard == shard {
			return e.Rev, true
		}
	}
	return 0, false
}

// String gives the text form.
func (p Position) String() string {
	var b strings.Builder
	for i, e := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(e.Shard, 10))
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(e.Rev, 10))
	}
	return b.String()
}

// maxPositionShards bounds a parsed position, far above any cluster's
// shard count.
const maxPositionShards = 1 << 16

// ParsePosition reads the text form; the empty string is the empty
// position.
func ParsePosition(s string) (Position, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxPositionShards {
		return nil, fmt.Errorf("client: watch position names %d shards (at most %d)", len(parts), maxPositionShards)
	}
	seen := make(map[uint64]bool, len(parts))
	p := make(Position, 0, len(parts))
	for _, part := range parts {
		sh, rev, ok := strings.Cut(part, ":")
		shard, err1 := strconv.ParseUint(sh, 10, 64)
		r, err2 := strconv.ParseUint(rev, 10, 64)
		if !ok || err1 != nil || err2 != nil || shard == 0 {
			return nil, fmt.Errorf("client: watch position entry %q is not shard:revision", part)
		}
		if seen[shard] {
			return nil, fmt.Errorf("client: watch position names shard %d twice", shard)
		}
		seen[shard] = true
		p = append(p, wire.ShardRev{Shard: shard, Rev: r})
	}
	slices.SortFunc(p, func(a, b wire.ShardRev) int { return cmp.Compare(a.Shard, b.Shard) })
	return p, nil
}

// positionOf is the position of a per-shard map, in shard order.
func positionOf(m map[uint64]uint64) Position {
	p := make(Position, 0, len(m))
	for s, r := range m {
		p = append(p, wire.ShardRev{Shard: s, Rev: r})
	}
	slices.SortFunc(p, func(a, b wire.ShardRev) int { return cmp.Compare(a.Shard, b.Shard) })
	return p
}

// WithWatchPosition resumes a prefix Watch from a position it delivered
// (WatchResponse.Position): every event after it, on every shard, exactly
// once, or a *CompactedError naming a shard that no longer retains them.
func WithWatchPosition(p Position) OpOption {
	return func(o *opConfig) { o.position = slices.Clone(p) }
}

// PositionAfter is the position once Events[:i+1] are delivered: a watch
// resumed from it delivers Events[i+1:] and what follows. (Position is
// PositionAfter(len(Events)-1).) A shard's entry before one of its events
// is that event's revision minus one: the shard has no event under the
// watch in between.
func (r WatchResponse) PositionAfter(i int) Position {
	p := slices.Clone(r.Position)
	for j := len(r.Events) - 1; j > i; j-- {
		ev := &r.Events[j]
		for k := range p {
			if p[k].Shard == ev.Shard {
				p[k].Rev = ev.Rev - 1
			}
		}
	}
	return p
}
