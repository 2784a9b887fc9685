package shard

import (
	"github.com/wardenlock/warden/wire"
)

// A leader transfer that the control plane (package control) sends to a
// node with a replica of the shard, as OpLeaderTransfer.

// transferLocal starts a transfer of the shard's leadership to replica rid
// through this node's replica of it. Asynchronous and best effort, as
// dragonboat's RequestLeaderTransfer: the answer says it was started.
func (s *Shard) transferLocal(req *wire.Request, done func(*wire.Response)) {
	if req.ToReplica == 0 {
		done(&wire.Response{ID: req.ID, Code: wire.InvalidArgument, Msg: "leader.transfer names the replica to lead (ToReplica)"})
		return
	}
	if err := s.nh.RequestLeaderTransfer(s.id, req.ToReplica); err != nil {
		done(ErrorResponse(req.ID, err, false))
		return
	}
	done(&wire.Response{ID: req.ID})
}
