package node

import (
	"context"

	"github.com/wardenlock/warden/placement"
)

// join admits this node into the cluster of cfg.Join (retrying until a
// running node admits it or the node closes) and starts its meta replica.
func (n *Node) join() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := n.Host.JoinCluster(ctx, func(ctx context.Context, self placement.Node) (uint64, error) {
		return n.Router.AskJoin(ctx, n.cfg.Join, self)
	})
	if err != nil {
		n.cfg.Log.Error("join failed", "err", err)
	} else {
		n.cfg.Log.Info("joined the cluster", "via", n.cfg.Join)
	}
	return err
}

// WaitJoined blocks until a joining node has been admitted (at once for a
// node that did not join) and returns the join's error.
func (n *Node) WaitJoined(ctx context.Context) error {
	if n.joinDone == nil {
		return nil
	}
	select {
	case err := <-n.joinDone:
		n.joinDone <- err // later callers see it too
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
