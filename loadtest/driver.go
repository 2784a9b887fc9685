package loadtest

import (
	"context"
	"time"
)

// Driver connects the scenarios to one system under test. The same
// scenarios run against Warden and its peers; a scenario that needs an
// optional capability (sessions, elections, watches) reports itself
// unsupported for a driver whose clients lack it.
type Driver interface {
	// Name is a short label for reports ("warden", "etcd", ...).
	Name() string
	// NewClient returns the client worker i uses. Drivers decide how many
	// connections back their clients (they may share one).
	NewClient(ctx context.Context, worker int) (Client, error)
	// Close releases what the driver holds (connections, sessions).
	Close() error
}

// Client takes exclusive locks for one worker. Lock must be safe to call
// from several goroutines at once (the held scenario pipelines acquires).
type Client interface {
	// Lock acquires path exclusively, waiting until granted or ctx ends.
	Lock(ctx context.Context, path string) (Held, error)
	Close() error
}

// Held is a granted lock.
type Held interface {
	Unlock(ctx context.Context) error
}

// PathLocker is a Client that can prepare the lock of one path once, for a
// worker that cycles over a few fixed paths: finding the path's lock again
// on every cycle (a string-keyed lookup) was measurable in the generator.
type PathLocker interface {
	// Locker returns the lock of path for one goroutine's use.
	Locker(path string) Locker
}

// Locker takes one prepared lock.
type Locker interface {
	Lock(ctx context.Context) (Held, error)
}

// lockerFor prepares path on cl, or binds the path for a client that
// cannot prepare it.
func lockerFor(cl Client, path string) Locker {
	if pl, ok := cl.(PathLocker); ok {
		return pl.Locker(path)
	}
	return boundPath{cl, path}
}

type boundPath struct {
	cl   Client
	path string
}

func (b boundPath) Lock(ctx context.Context) (Held, error) { return b.cl.Lock(ctx, b.path) }

// MultiLocker is a Client that can take several locks in one request (all
// or nothing); the held scenario uses it to fill faster.
type MultiLocker interface {
	// LockAll acquires every path exclusively; the paths share a namespace
	// (one shard).
	LockAll(ctx context.Context, paths []string) (Held, error)
}

// Elector is a Client that can run leader elections.
type Elector interface {
	// Campaign returns once this client leads the election at path.
	Campaign(ctx context.Context, path, value string) (Held, error)
}

// Watcher is a Client that can report releases of a lock.
type Watcher interface {
	// WatchReleases sends the local receive time of every release of the lock
	// at path until ctx ends. It returns once the watch is established.
	WatchReleases(ctx context.Context, path string, out chan<- time.Time) error
}

// SessionKeeper is a Driver that can open many bare sessions (leases) and
// keep them alive in the background.
type SessionKeeper interface {
	// KeepSessions opens n sessions of the given TTL; stop closes them.
	// alive reports how many are still alive.
	KeepSessions(ctx context.Context, n int, ttl time.Duration, progress func()) (alive func() int, stop func(), err error)
}

// ErrorCoder names the code of an error ("conflict", "unavailable", ...) for
// the errors-by-code table. Drivers without it get a generic classification.
type ErrorCoder interface {
	ErrorCode(err error) string
}

// Versioner reports the server version for reports.
type Versioner interface {
	Version(ctx context.Context) string
}
