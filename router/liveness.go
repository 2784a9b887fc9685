package router

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/placement"
	"github.com/wardenlock/warden/wire"
)

// Node liveness as this router sees it, for operators (warden status,
// /v1/status, the status page). Every livenessEvery each other node of the
// range table is asked for its status over the forwarding connection (the
// one requests are forwarded on): an answer within livenessTimeout makes it
// up; a refused connection (nothing listens on its client port: the process
// is gone) down; anything else (a timeout, no route, a refused handshake)
// unreachable. A node not asked yet is unknown. The node itself is up.

const (
	livenessEvery   = time.Second
	livenessTimeout = 2 * time.Second
)

// Node states.
const (
	NodeUp          = "up"
	NodeDown        = "down"        // its client port refuses connections
	NodeUnreachable = "unreachable" // no answer, or no usable connection
	NodeUnknown     = "unknown"     // not asked yet
)

// Liveness is what this router last learnt about one node.
type Liveness struct {
	State     string    `json:"state"`
	LastHeard time.Time `json:"last_heard,omitzero"` // its last answer (zero: never)
	Error     string    `json:"error,omitempty"`     // why it is not up
	Version   string    `json:"version,omitempty"`   // its build, as its status says
	// CPU is its CPU use over the last few seconds, as its last status
	// said (nil: it does not measure it, or never answered).
	CPU *cpuload.Reading `json:"cpu,omitempty"`
}

type liveness struct {
	mu      sync.Mutex
	nodes   map[uint64]*Liveness
	probing map[uint64]bool
}

// NodeLiveness returns this router's view of every node of the table.
func (s *Server) NodeLiveness() map[uint64]Liveness {
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	out := make(map[uint64]Liveness, len(s.live.nodes))
	for id, l := range s.live.nodes {
		out[id] = *l
	}
	if h := s.cfg.Host; h != nil {
		self := Liveness{State: NodeUp, LastHeard: time.Now().UTC(), Version: buildVersion()}
		if r, ok := h.CPU(); ok {
			self.CPU = &r
		}
		out[h.NodeID()] = self
	}
	return out
}

// livenessLoop asks every other node for its status, every livenessEvery.
func (s *Server) livenessLoop() {
	t := time.NewTicker(livenessEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		tab := s.cache.table()
		if tab == nil {
			continue
		}
		s.live.forget(tab)
		for _, n := range tab.Nodes {
			if h := s.cfg.Host; (h != nil && n.ID == h.NodeID()) || n.ClientAddr == "" || !s.live.start(n.ID) {
				continue
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.live.record(n.ID, s.probe(n))
			}()
		}
	}
}

// probe asks node n for its status and says what the attempt showed.
func (s *Server) probe(n placement.Node) Liveness {
	p, err := s.peers.get(n.ClientAddr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return Liveness{State: NodeDown, Error: err.Error()}
		}
		return Liveness{State: NodeUnreachable, Error: err.Error()}
	}
	answer := make(chan *wire.Response, 1)
	p.send(&wire.Request{Op: wire.OpStatus}, func(r *wire.Response) {
		select {
		case answer <- r:
		default:
		}
	})
	timer := time.NewTimer(livenessTimeout)
	defer timer.Stop()
	select {
	case r := <-answer:
		if err := r.AsError(); err != nil {
			return Liveness{State: NodeUnreachable, Error: err.Error()}
		}
		var st Status
		if err := json.Unmarshal(r.Value, &st); err != nil {
			return Liveness{State: NodeUnreachable, Error: "status answer: " + err.Error()}
		}
		if st.Node != 0 && st.Node != n.ID {
			return Liveness{State: NodeUnreachable, Error: "its address answers as node " + strconv.FormatUint(st.Node, 10)}
		}
		return Liveness{State: NodeUp, LastHeard: time.Now().UTC(), Version: st.Version, CPU: st.CPU}
	case <-timer.C:
		return Liveness{State: NodeUnreachable, Error: "no answer within " + livenessTimeout.String()}
	case <-s.stop:
		return Liveness{State: NodeUnknown}
	}
}

// start marks id as being asked; false when an earlier question is still
// out (a node that does not answer holds one goroutine, not one a second).
func (l *liveness) start(id uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.probing == nil {
		l.probing, l.nodes = map[uint64]bool{}, map[uint64]*Liveness{}
	}
	if l.probing[id] {
		return false
	}
	l.probing[id] = true
	if l.nodes[id] == nil {
		l.nodes[id] = &Liveness{State: NodeUnknown}
	}
	return true
}

// record keeps what a probe showed; a node that is not up keeps the time
// it was last heard from.
func (l *liveness) record(id uint64, got Liveness) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.probing, id)
	cur := l.nodes[id]
	if cur == nil || got.State == NodeUnknown {
		return
	}
	if got.State != NodeUp {
		got.LastHeard, got.Version = cur.LastHeard, cur.Version // its CPU is not known now
	}
	*cur = got
}

// forget drops the nodes that left the table.
func (l *liveness) forget(t *placement.Table) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.nodes {
		if _, ok := t.Node(id); !ok {
			delete(l.nodes, id)
		}
	}
}

// HeardAgo says, for people, how long before now a node last answered.
func HeardAgo(at, now time.Time) string {
	switch d := now.Sub(at); {
	case at.IsZero():
		return "never"
	case d < time.Second:
		return "just now"
	default:
		return d.Round(time.Second).String() + " ago"
	}
}
