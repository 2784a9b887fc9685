// Package logagg keeps a line that can repeat without bound (a lease
// expiry, a refused request) from flooding the log: per key, the first
// occurrence after a quiet interval is logged at once, and the rest of the
// interval is summed up in one line with a count.
package logagg

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// maxKeys bounds the keys counted in one interval; past it, the rest are
// counted under one overflow key.
const maxKeys = 1024

// Line is one aggregated log line.
type Line struct {
	log   *slog.Logger
	level slog.Level
	msg   string
	every time.Duration

	mu    sync.Mutex
	keys  map[string]*count
	timer *time.Timer
}

type count struct {
	n    int // occurrences since the line was last written
	last []any
}

// New returns a line written to log at level with msg, at most once per
// key and interval every, plus one summary per key and interval.
func New(log *slog.Logger, level slog.Level, msg string, every time.Duration) *Line {
	return &Line{log: log, level: level, msg: msg, every: every, keys: map[string]*count{}}
}

// Add notes one occurrence for key with its attributes (slog key-value
// pairs). Nothing is done when the logger does not write the line's level.
func (l *Line) Add(key string, args ...any) {
	if l == nil || l.log == nil || !l.log.Enabled(context.Background(), l.level) {
		return
	}
	l.mu.Lock()
	c := l.keys[key]
	if c == nil {
		if len(l.keys) >= maxKeys {
			key, args = "(other)", nil
			c = l.keys[key]
		}
	}
	if c == nil {
		// The first one since the interval began: written now, in full.
		l.keys[key] = &count{}
		if l.timer == nil {
			l.timer = time.AfterFunc(l.every, l.flush)
		}
		l.mu.Unlock()
		l.log.Log(context.Background(), l.level, l.msg, args...)
		return
	}
	c.n++
	c.last = args
	l.mu.Unlock()
}

// flush writes one line per key that repeated during the interval. Those
// keys stay counted through the next interval (their next occurrence is a
// repeat too); a key quiet for a whole interval is forgotten, and its next
// occurrence is written at once again.
func (l *Line) flush() {
	type summary struct {
		key  string
		n    int
		last []any
	}
	l.mu.Lock()
	var out []summary
	next := map[string]*count{}
	for key, c := range l.keys {
		if c.n > 0 {
			out = append(out, summary{key, c.n, c.last})
			next[key] = &count{}
		}
	}
	l.keys = next
	l.timer = nil
	if len(out) > 0 {
		l.timer = time.AfterFunc(l.every, l.flush)
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b summary) int { return strings.Compare(a.key, b.key) })
	for _, s := range out {
		args := append([]any{"repeated", s.n, "interval", l.every, "key", s.key}, s.last...)
		l.log.Log(context.Background(), l.level, l.msg+" (repeated)", args...)
	}
}
