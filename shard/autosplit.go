package shard

// RangePolicy tunes the placement loop's range work. The zero value turns
// it off.
type RangePolicy struct {
	AutoSplit bool
}
