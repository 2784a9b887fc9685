package fence

import (
	"errors"
	"fmt"
	"sync"
)

// ErrStaleToken is returned when a token is lower than one already seen for
// the same lock: its holder has lost the lock.
var ErrStaleToken = errors.New("fence: stale token")

// Guard remembers the highest token seen per lock path. It is safe for
// concurrent use.
type Guard struct {
	mu   sync.Mutex
	seen map[string]uint64
}

// NewGuard makes an empty guard.
func NewGuard() *Guard { return &Guard{seen: map[string]uint64{}} }

// Check admits token for path if it is at least the highest seen (the same
// holder may write many times), and records it.
func (g *Guard) Check(path string, token uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if token == 0 {
		return fmt.Errorf("%w: token 0 is never issued", ErrStaleToken)
	}
	if max := g.seen[path]; token < max {
		return fmt.Errorf("%w: %d is below %d already seen for %s", ErrStaleToken, token, max, path)
	}
	g.seen[path] = token
	return nil
}

// Do runs write only if token passes Check; the check and the write are
// atomic with respect to other Do calls on the guard.
func (g *Guard) Do(path string, token uint64, write func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if token == 0 || token < g.seen[path] {
		return fmt.Errorf("%w: %d is below %d already seen for %s", ErrStaleToken, token, g.seen[path], path)
	}
	if err := write(); err != nil {
		return err
	}
	g.seen[path] = token
	return nil
}
