package chaos

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// EventLog records harness actions (faults, restarts) on the suite's
// monotonic clock, for reports and porcupine annotations.
type EventLog struct {
	start time.Time
	mu    sync.Mutex
	evs   []Event
	echo  io.Writer
}

// Event is one harness action.
type Event struct {
	At   time.Duration // since the log started (monotonic)
	What string
}

// NewEventLog starts a log; echo (may be nil) gets every line as it happens.
func NewEventLog(echo io.Writer) *EventLog { return &EventLog{start: time.Now(), echo: echo} }

// Now is the suite's clock: nanoseconds since the log started (monotonic).
func (l *EventLog) Now() int64 { return int64(time.Since(l.start)) }

// Add records an action.
func (l *EventLog) Add(format string, args ...any) {
	ev := Event{At: time.Since(l.start), What: fmt.Sprintf(format, args...)}
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
	if l.echo != nil {
		fmt.Fprintf(l.echo, "%9.3fs  %s\n", ev.At.Seconds(), ev.What)
	}
}

// Events returns a copy of the log.
func (l *EventLog) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.evs...)
}
