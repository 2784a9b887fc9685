package node

import (
	"github.com/wardenlock/warden/control"
	"github.com/wardenlock/warden/internal/cpuload"
	"github.com/wardenlock/warden/raftnode"
	"github.com/wardenlock/warden/router"
	"github.com/wardenlock/warden/shard"
	"github.com/wardenlock/warden/statemachine"
	"github.com/wardenlock/warden/wire"
)

// routerHost is the node's shard host as its router sees it (router.Host).
type routerHost struct {
	*control.Host
	cpu func() cpuload.Reading // nil: not measured
}

var _ router.Host = routerHost{}

func (h routerHost) CPU() (cpuload.Reading, bool) {
	if h.cpu == nil {
		return cpuload.Reading{}, false
	}
	return h.cpu(), true
}

func (h routerHost) Replica(id uint64) (router.Replica, bool) {
	s, ok := h.Host.Shard(id)
	if !ok {
		return nil, false
	}
	return s, true
}

func (h routerHost) SetForwarder(f func(shardID uint64, req *wire.Request, done func(*wire.Response))) {
	h.Host.SetForwarder(f)
}

func (h routerHost) RangeLoad(id uint64) ([]wire.Range, []uint64, error) {
	v, err := h.NodeHost().StaleRead(id, statemachine.RangeLoadQuery{})
	if err != nil {
		return nil, nil, err
	}
	l, _ := v.(statemachine.RangeLoad)
	return l.Ranges, l.Ops, nil
}

func (routerHost) ErrorAnswer(err error) *wire.Response { return shard.ErrorResponse(0, err, false) }

func (routerHost) RaftPasses() any { return raftnode.Passes() }

func (h routerHost) ShardPolicyState() any {
	if st := h.Host.PolicyState(); st != nil {
		return st
	}
	return nil
}
