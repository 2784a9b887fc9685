package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/wire"
)

// The CLI's -o json has one shape for every verb (docs/operations.md, "The
// CLI's JSON"):
//
//   - field names are snake_case; a field that is not set is left out;
//   - enums (modes, event kinds, causes, node states) are their names;
//   - times are RFC 3339 strings in UTC; durations are integer
//     milliseconds in fields ending in _ms;
//   - lease and client ids are hex strings (wire.HexID), tokens, revisions
//     and versions plain numbers;
//   - a stored value is a UTF-8 string, or base64 with
//     "value_encoding": "base64" beside it when it is not valid UTF-8;
//   - a one-shot verb prints one indented document; a verb that streams
//     (watch, elect --observe) prints one compact object per line.
//
// The documents the server sends as JSON (status, shards, audit) follow the
// same rules and are printed through the same encoder.

func jsonOutput() bool { return gf.output == "json" }

// printJSON prints one indented document.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printJSONLine prints one compact object on a line of its own.
func printJSONLine(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// jsonValue is a stored value in JSON: text, or base64 when it is not UTF-8.
type jsonValue struct {
	Value         string `json:"value"`
	ValueEncoding string `json:"value_encoding,omitempty"`
}

func valueOf(b []byte) jsonValue {
	if utf8.Valid(b) {
		return jsonValue{Value: string(b)}
	}
	return jsonValue{Value: base64.StdEncoding.EncodeToString(b), ValueEncoding: "base64"}
}

// optJSONValue is a value that may be absent (an event without one).
type optJSONValue struct {
	Value         string `json:"value,omitempty"`
	ValueEncoding string `json:"value_encoding,omitempty"`
}

func optValueOf(b []byte) optJSONValue {
	if len(b) == 0 {
		return optJSONValue{}
	}
	v := valueOf(b)
	return optJSONValue{v.Value, v.ValueEncoding}
}

// timeOf is a stamped unix-millisecond time as a time (zero when unset).
func timeOf(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

type kvOut struct {
	Key string `json:"key"`
	jsonValue
	Version        uint64     `json:"version"`
	Lease          wire.HexID `json:"lease,omitempty"`
	CreateRevision uint64     `json:"create_revision,omitempty"`
	ModRevision    uint64     `json:"mod_revision,omitempty"`
}

func kvOf(kv client.KV) kvOut {
	return kvOut{Key: kv.Key, jsonValue: valueOf(kv.Value), Version: kv.Version, Lease: wire.HexID(kv.Lease),
		CreateRevision: kv.CreateRev, ModRevision: kv.ModRev}
}

// putOut answers kv put; deletedOut kv del.
type putOut struct {
	Key     string     `json:"key"`
	Version uint64     `json:"version"`
	Lease   wire.HexID `json:"lease,omitempty"` // --ephemeral: the session the key lives with
}

type deletedOut struct {
	Key     string `json:"key"`
	Deleted bool   `json:"deleted"`
}

type holderOut struct {
	Path      string     `json:"path"`
	Mode      string     `json:"mode"`
	Token     uint64     `json:"token"`
	Lease     wire.HexID `json:"lease,omitempty"`
	Owner     string     `json:"owner,omitempty"`
	Holds     uint32     `json:"holds,omitempty"`
	TTLLeftMs int64      `json:"ttl_left_ms,omitempty"`
}

func holderOf(h client.Holder) holderOut {
	return holderOut{Path: h.Path, Mode: h.Mode.String(), Token: h.Token, Lease: wire.HexID(h.Lease), Owner: h.Owner,
		Holds: h.Count, TTLLeftMs: h.TTL}
}

// lockRowOut is one row of locks ls: a holder and the length of its queue.
type lockRowOut struct {
	holderOut
	Waiters int `json:"waiters"`
}

type waiterOut struct {
	Path   string     `json:"path,omitempty"`
	Mode   string     `json:"mode"`
	Lease  wire.HexID `json:"lease,omitempty"`
	Owner  string     `json:"owner,omitempty"`
	Client wire.HexID `json:"client,omitempty"`
	Seq    uint64     `json:"seq,omitempty"`
}

type lockInfoOut struct {
	Path           string      `json:"path"`
	Holders        []holderOut `json:"holders"`
	Waiters        []waiterOut `json:"waiters"`
	Permits        int         `json:"permits,omitempty"`
	LockDelayUntil time.Time   `json:"lock_delay_until,omitzero"`
	RevokeAt       time.Time   `json:"revoke_at,omitzero"`
}

func lockInfoOf(info client.LockInfo) lockInfoOut {
	out := lockInfoOut{Path: info.Path, Holders: []holderOut{}, Waiters: []waiterOut{}, Permits: info.Permits,
		LockDelayUntil: utc(info.DelayUntil), RevokeAt: utc(info.RevokeAt)}
	for _, h := range info.Holders {
		ho := holderOf(h)
		if ho.Path == "" {
			ho.Path = info.Path
		}
		out.Holders = append(out.Holders, ho)
	}
	for _, w := range info.Waiters {
		out.Waiters = append(out.Waiters, waiterOut{Path: w.Path, Mode: w.Mode.String(), Lease: wire.HexID(w.Lease),
			Owner: w.Owner, Client: wire.HexID(w.Client), Seq: w.Seq})
	}
	return out
}

type eventOut struct {
	Revision uint64     `json:"revision"`
	Shard    uint64     `json:"shard,omitempty"`
	Kind     string     `json:"kind"`
	Cause    string     `json:"cause,omitempty"`
	Path     string     `json:"path"`
	Mode     string     `json:"mode,omitempty"`
	Token    uint64     `json:"token,omitempty"`
	Lease    wire.HexID `json:"lease,omitempty"`
	Owner    string     `json:"owner,omitempty"`
	optJSONValue
	Version uint64     `json:"version,omitempty"`
	Client  wire.HexID `json:"client,omitempty"`
	Seq     uint64     `json:"seq,omitempty"`
	Time    time.Time  `json:"time,omitzero"`
	TTLMs   int64      `json:"ttl_ms,omitempty"`
}

// watchEventOut is one event of watch; a prefix watch's carries the
// position after it, in the text form --position takes.
type watchEventOut struct {
	eventOut
	Position string `json:"position,omitempty"`
}

func eventOf(ev client.Event) eventOut {
	out := eventOut{Revision: ev.Rev, Shard: ev.Shard, Kind: ev.Kind.String(), Path: ev.Path, Token: ev.Token,
		Lease: wire.HexID(ev.Lease), Owner: ev.Owner, optJSONValue: optValueOf(ev.Value), Version: ev.Version,
		Client: wire.HexID(ev.Client), Seq: ev.Seq, Time: timeOf(ev.Time), TTLMs: ev.TTL}
	if ev.Cause != 0 {
		out.Cause = ev.Cause.String()
	}
	switch ev.Kind {
	case wire.EvAcquired, wire.EvQueued, wire.EvDequeued, wire.EvReleased:
		out.Mode = ev.Mode.String()
	}
	return out
}

// leaderOut is an election's leader (elect --observe); no token: none.
type leaderOut struct {
	Path string `json:"path"`
	optJSONValue
	Token uint64     `json:"token,omitempty"`
	Lease wire.HexID `json:"lease,omitempty"`
	Owner string     `json:"owner,omitempty"`
}

// heldOut is what lock, sem, lock-all and elect hold while they run
// without a command.
type heldOut struct {
	Path  string     `json:"path,omitempty"`
	Mode  string     `json:"mode,omitempty"`
	Token uint64     `json:"token,omitempty"`
	Locks []heldLock `json:"locks,omitempty"` // lock-all: every path with its token
	Lease wire.HexID `json:"lease"`
}

type heldLock struct {
	Path  string `json:"path"`
	Token uint64 `json:"token"`
}

// rangeOut is one range of `warden ranges`: bounds as route keys in hex
// ("" is the start or the end of the key space), with the share of the key
// space it covers.
type rangeOut struct {
	Index  int     `json:"index"`
	Start  string  `json:"start"`
	End    string  `json:"end"`
	Share  float64 `json:"share"`
	Shard  uint64  `json:"shard"`
	Gen    uint64  `json:"gen"`
	Ops    uint64  `json:"ops"`
	Moving string  `json:"moving,omitempty"`
}

// doneOut reports an administrative action: what was asked, on what.
type doneOut struct {
	Action string     `json:"action"`
	Path   string     `json:"path,omitempty"`
	Range  string     `json:"range,omitempty"` // a range's start key in hex
	Node   uint64     `json:"node,omitempty"`
	Shard  uint64     `json:"shard,omitempty"`
	From   uint64     `json:"from,omitempty"`
	To     uint64     `json:"to,omitempty"`
	Move   uint64     `json:"move,omitempty"` // a range move's id
	Token  uint64     `json:"token,omitempty"`
	Owner  string     `json:"owner,omitempty"`
	Lease  wire.HexID `json:"lease,omitempty"`
	Leader uint64     `json:"leader,omitempty"`
	// GraceMs is a revocation's grace.
	GraceMs int64 `json:"grace_ms,omitempty"`
}

// report prints what an action did: its JSON, or the line for people.
func report(d doneOut, text string) error {
	if jsonOutput() {
		return printJSON(os.Stdout, d)
	}
	_, err := io.WriteString(os.Stdout, text+"\n")
	return err
}
