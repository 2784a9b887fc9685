// Package linmodel is the lock register's linearizability model (porcupine),
// the history its workload records, and the workload's clients: shared by
// the fault suite (package chaos) and the node tests.
package linmodel

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/wardenlock/warden/wire"
)

// The lock-register model: exclusive, reentrant, hierarchical locks held by
// (lease, owner), with fencing tokens, session leases that only end by an
// explicit revoke (the workload uses TTLs far longer than the run, as
// etcd's robustness suite does), and linearizable reads of a path's holder.
// Histories are partitioned by namespace (the depth-2 prefix that decides
// the shard), which keeps every hierarchical conflict inside a partition;
// lease-wide operations (keepalive, revoke) go into every partition.

// RegKind is a register operation.
type RegKind uint8

const (
	RegAcquire RegKind = iota + 1
	RegRelease
	RegRead
	RegKeepAlive
	RegRevoke
)

func (k RegKind) String() string {
	return [...]string{"?", "acquire", "release", "read", "keepalive", "revoke"}[k]
}

// RegInput is one call.
type RegInput struct {
	Kind  RegKind
	Path  string
	Lease uint64
	Owner string
	Token uint64 // release: the token released
}

// RegOutput is one answer.
type RegOutput struct {
	Unknown bool      // no definite answer: may or may not have applied
	Code    wire.Code // the service's answer
	Token   uint64    // acquire: the token granted
	Count   uint32    // acquire/release: holds after the operation
	Holder  *RegHold  // read: the holder (nil = free)
	Gone    bool      // keepalive: the lease was reported gone
}

// RegHold is a holder as the model and reads see it.
type RegHold struct {
	Lease uint64
	Owner string
	Token uint64 // 0: granted by an operation whose answer was lost
	Count uint32
}

type regState struct {
	holds map[string]RegHold
	last  map[string]uint64 // highest token known granted per path
	dead  map[uint64]bool   // revoked leases
}

func (s regState) clone() regState {
	n := regState{holds: make(map[string]RegHold, len(s.holds)), last: make(map[string]uint64, len(s.last)), dead: make(map[uint64]bool, len(s.dead))}
	for k, v := range s.holds {
		n.holds[k] = v
	}
	for k, v := range s.last {
		n.last[k] = v
	}
	for k, v := range s.dead {
		n.dead[k] = v
	}
	return n
}

func (s regState) key() string {
	var b strings.Builder
	paths := make([]string, 0, len(s.holds))
	for p := range s.holds {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		h := s.holds[p]
		fmt.Fprintf(&b, "%s=%d/%s/%d/%d;", p, h.Lease, h.Owner, h.Token, h.Count)
	}
	b.WriteByte('|')
	paths = paths[:0]
	for p := range s.last {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(&b, "%s=%d;", p, s.last[p])
	}
	b.WriteByte('|')
	var dead []uint64
	for l := range s.dead {
		dead = append(dead, l)
	}
	sort.Slice(dead, func(i, j int) bool { return dead[i] < dead[j] })
	for _, l := range dead {
		fmt.Fprintf(&b, "%d;", l)
	}
	return b.String()
}

// related reports whether a and b are the same path or one contains the other.
func related(a, b string) bool {
	if a == b {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == "/" || strings.HasPrefix(b, a+"/")
}

// conflicts returns (other holder conflicts, own hold elsewhere conflicts).
func (s regState) conflicts(in RegInput) (other, self bool) {
	for p, h := range s.holds {
		if !related(p, in.Path) {
			continue
		}
		same := h.Lease == in.Lease && h.Owner == in.Owner
		switch {
		case same && p == in.Path:
		case same:
			self = true
		default:
			other = true
		}
	}
	return other, self
}

func busy(c wire.Code) bool { return c == wire.Conflict || c == wire.SelfConflict }

// step returns every state the operation can lead to from s (none: illegal).
func regStep(s regState, in RegInput, out RegOutput) []regState {
	switch in.Kind {
	case RegAcquire:
		return stepAcquire(s, in, out)
	case RegRelease:
		return stepRelease(s, in, out)
	case RegRead:
		return stepRead(s, in, out)
	case RegKeepAlive:
		if out.Unknown {
			return []regState{s}
		}
		if out.Gone == s.dead[in.Lease] {
			return []regState{s}
		}
		return nil
	case RegRevoke:
		n := s.clone()
		n.dead[in.Lease] = true
		for p, h := range n.holds {
			if h.Lease == in.Lease {
				delete(n.holds, p)
			}
		}
		if out.Unknown {
			return []regState{s, n}
		}
		if out.Code == wire.OK {
			return []regState{n}
		}
		return nil
	}
	return nil
}

func stepAcquire(s regState, in RegInput, out RegOutput) []regState {
	other, self := s.conflicts(in)
	cur, reentrant := s.holds[in.Path]
	reentrant = reentrant && cur.Lease == in.Lease && cur.Owner == in.Owner
	grant := func(token uint64) (regState, bool) {
		n := s.clone()
		if reentrant {
			if token != 0 && cur.Token != 0 && token != cur.Token {
				return n, false
			}
			if cur.Token == 0 {
				cur.Token = token
			}
			cur.Count++
			n.holds[in.Path] = cur
			return n, true
		}
		if token != 0 && token <= s.last[in.Path] {
			return n, false // fencing tokens strictly increase per path
		}
		n.holds[in.Path] = RegHold{Lease: in.Lease, Owner: in.Owner, Token: token, Count: 1}
		if token != 0 {
			n.last[in.Path] = token
		}
		delete(n.dead, in.Lease) // a late first use may re-create the lease on its shard
		return n, true
	}
	if out.Unknown {
		states := []regState{s}
		if !other && !self {
			if n, ok := grant(0); ok {
				states = append(states, n)
			}
		}
		return states
	}
	if s.dead[in.Lease] {
		if out.Code == wire.SessionExpired {
			return []regState{s}
		}
		return nil
	}
	switch {
	case out.Code == wire.OK:
		if other || self {
			return nil
		}
		want := cur.Count + 1 // grant() below changes cur
		if n, ok := grant(out.Token); ok && (!reentrant || out.Count == want) {
			return []regState{n}
		}
		return nil
	case busy(out.Code):
		if other || self {
			return []regState{s}
		}
	}
	return nil
}

func stepRelease(s regState, in RegInput, out RegOutput) []regState {
	cur, held := s.holds[in.Path]
	match := held && in.Token != 0 && cur.Token == in.Token
	release := func() regState {
		n := s.clone()
		if cur.Count > 1 {
			cur.Count--
			n.holds[in.Path] = cur
		} else {
			delete(n.holds, in.Path)
		}
		return n
	}
	if out.Unknown {
		if match {
			return []regState{s, release()}
		}
		return []regState{s}
	}
	switch out.Code {
	case wire.OK:
		if match && out.Count == cur.Count-1 {
			return []regState{release()}
		}
	case wire.StaleToken, wire.NotHolder:
		if !match {
			return []regState{s}
		}
	}
	return nil
}

func stepRead(s regState, in RegInput, out RegOutput) []regState {
	if out.Unknown {
		return []regState{s}
	}
	cur, held := s.holds[in.Path]
	if out.Holder == nil {
		if !held {
			return []regState{s}
		}
		return nil
	}
	if !held {
		return nil
	}
	h := *out.Holder
	if h.Lease != cur.Lease || h.Owner != cur.Owner || h.Count != cur.Count {
		return nil
	}
	if cur.Token == 0 { // learn the token of a grant whose answer was lost
		if h.Token <= s.last[in.Path] {
			return nil
		}
		n := s.clone()
		cur.Token = h.Token
		n.holds[in.Path] = cur
		n.last[in.Path] = h.Token
		return []regState{n}
	}
	if h.Token != cur.Token {
		return nil
	}
	return []regState{s}
}

// Namespace returns the depth-2 prefix of path (its partition).
func Namespace(path string) string {
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 3)
	if len(parts) >= 2 {
		return "/" + parts[0] + "/" + parts[1]
	}
	return path
}

// RegisterModel is the porcupine model of the lock register.
func RegisterModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byNS := map[string][]porcupine.Operation{}
			var global []porcupine.Operation
			for _, op := range history {
				in := op.Input.(RegInput)
				if in.Kind == RegKeepAlive || in.Kind == RegRevoke {
					global = append(global, op)
					continue
				}
				ns := Namespace(in.Path)
				byNS[ns] = append(byNS[ns], op)
			}
			names := make([]string, 0, len(byNS))
			for ns := range byNS {
				names = append(names, ns)
			}
			sort.Strings(names)
			var out [][]porcupine.Operation
			for _, ns := range names {
				part := append(byNS[ns], global...)
				sort.SliceStable(part, func(i, j int) bool { return part[i].Call < part[j].Call })
				out = append(out, part)
			}
			if len(out) == 0 && len(global) > 0 {
				out = append(out, global)
			}
			return out
		},
		Init: func() []interface{} {
			return []interface{}{regState{holds: map[string]RegHold{}, last: map[string]uint64{}, dead: map[uint64]bool{}}}
		},
		Step: func(state, input, output interface{}) []interface{} {
			var out []interface{}
			for _, n := range regStep(state.(regState), input.(RegInput), output.(RegOutput)) {
				out = append(out, n)
			}
			return out
		},
		Equal: func(a, b interface{}) bool { return a.(regState).key() == b.(regState).key() },
		Hash: func(s interface{}) uint64 {
			h := fnv.New64a()
			h.Write([]byte(s.(regState).key()))
			return h.Sum64()
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(RegInput), output.(RegOutput)
			var res string
			switch {
			case out.Unknown:
				res = "unknown"
			case in.Kind == RegRead && out.Holder == nil:
				res = "free"
			case in.Kind == RegRead:
				res = fmt.Sprintf("held by %d/%s token %d ×%d", out.Holder.Lease%10000, out.Holder.Owner, out.Holder.Token, out.Holder.Count)
			case in.Kind == RegKeepAlive:
				res = map[bool]string{true: "gone", false: "alive"}[out.Gone]
			case out.Code == wire.OK:
				res = fmt.Sprintf("ok token %d count %d", out.Token, out.Count)
			default:
				res = out.Code.String()
			}
			switch in.Kind {
			case RegRelease:
				return fmt.Sprintf("release(%s, token %d) → %s", in.Path, in.Token, res)
			case RegKeepAlive, RegRevoke:
				return fmt.Sprintf("%s(lease %d) → %s", in.Kind, in.Lease%10000, res)
			}
			return fmt.Sprintf("%s(%s, %d/%s) → %s", in.Kind, in.Path, in.Lease%10000, in.Owner, res)
		},
		DescribeState: func(state interface{}) string {
			return state.(regState).key()
		},
	}
	return nm.ToModel()
}
