package node_test

import (
	"testing"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/node/nodetest"
)

// TestDeadHolderExpiresUnderLeaderChurn: a dead holder's lease ends under
// leadership churn, on a real cluster: the
// shard's leadership is handed to another node every 600 ms, well under the
// holder's 2 s TTL, for as long as the test runs. Each new leader used to
// give every lease a full TTL, so the dead holder's lease never ended and
// its waiter waited forever. With lease checkpoints the waiter is granted
// while the churn goes on, and never before the holder's TTL has run out
// after its last acknowledged keepalive. The waiter's own (live) session
// is kept alive across every change meanwhile.
func TestDeadHolderExpiresUnderLeaderChurn(t *testing.T) {
	c := nodetest.Start(t, nodetest.Options{})
	ctx := ctxT(t, 120*time.Second)
	const ttl = 2 * time.Second
	path := "/churn/lease/a"
	shardID := shardOf(t, c, path)

	holderClient := newClient(t, c)
	holder := client.NewMutex(session(t, holderClient, ttl), path)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiterClient := newClient(t, c)
	waiterSession := session(t, waiterClient, 10*time.Second)
	waiter := client.NewMutex(waiterSession, path)
	granted := make(chan time.Time, 1)
	go func() {
		if err := waiter.Lock(ctx); err == nil {
			granted <- time.Now()
		}
	}()
	time.Sleep(300 * time.Millisecond) // queued behind the holder

	// The holder dies: nothing keeps its session alive from now on. Its
	// last acknowledged keepalive was sent at most TTL/3 before this.
	died := time.Now()
	holderClient.Close()

	changes, last := 0, c.LeaderOf(shardID)
	ticker := time.NewTicker(600 * time.Millisecond)
	defer ticker.Stop()
	var at time.Time
churn:
	for {
		select {
		case at = <-granted:
			break churn
		case <-ctx.Done():
			t.Fatalf("the dead holder's lease never ended: %d leader changes in %v", changes, time.Since(died))
		case <-ticker.C:
			cur := c.LeaderOf(shardID)
			if cur >= 0 && cur != last {
				changes++
				last = cur
			}
			if cur < 0 {
				continue
			}
			to := uint64((cur+1)%len(c.Nodes)) + 1
			if err := c.Nodes[cur].Host.TransferLeader(shardID, to); err != nil {
				t.Logf("transfer to node %d: %v", to, err)
			}
		}
	}
	held := at.Sub(died)
	t.Logf("waiter granted %v after the holder died, through %d leader changes", held, changes)
	if held < ttl-ttl/3 {
		t.Fatalf("lock handed over %v after the holder died, before its TTL %v", held, ttl)
	}
	// On average at least one leader change per TTL: without checkpoints,
	// churn at this rate kept the dead lease alive (a run without them was
	// still waiting after 120 s: each change gave it a full TTL again).
	if want := int(held/ttl) + 1; changes < want {
		t.Fatalf("only %d leader changes in %v before the grant (want %d, one per TTL): the churn did not take place",
			changes, held, want)
	}
	if waiter.Token() <= holder.Token() {
		t.Fatalf("waiter token %d not above the dead holder's %d", waiter.Token(), holder.Token())
	}
	// The waiter's session lived through every change.
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatalf("the waiter's live session did not survive the churn: %v", err)
	}
}
