package linmodel

import (
	"encoding/json"
	"math"
	"sync"

	"github.com/anishathalye/porcupine"
)

// UnknownReturn marks an operation whose outcome the client never learnt
// (timeout, broken connection): it may have taken effect at any time
// after its call, so its return time is pushed to the end of time.
const UnknownReturn = math.MaxInt64

// History collects client operations for porcupine, with call and return
// times on the suite's monotonic clock.
type History struct {
	clock func() int64
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// NewHistory records times from clock (EventLog.Now).
func NewHistory(clock func() int64) *History { return &History{clock: clock} }

// Call returns the call time of an operation about to be sent.
func (h *History) Call() int64 { return h.clock() }

// Add records a finished operation; unknown outcomes get an infinite return.
func (h *History) Add(client int, in RegInput, call int64, out RegOutput) {
	ret := h.clock()
	if out.Unknown {
		ret = UnknownReturn
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

// Ops returns a copy of the history.
func (h *History) Ops() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// MarshalJSON writes the history (for the report folder).
func (h *History) MarshalJSON() ([]byte, error) { return json.Marshal(h.Ops()) }
