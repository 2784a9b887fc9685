package chaos

import (
	"context"
	"math/rand"
	"sync"

	"github.com/wardenlock/warden/client"
)

// RunWith drives the register workload on the given clients (workload
// client i uses clients[i]) until ctx ends: the same operations as Run, for
// clusters that are not started by the fault suite (node/nodetest).
func (w *Register) RunWith(ctx context.Context, clients []*client.Client, seed int64) {
	var wg sync.WaitGroup
	paths := RegisterPaths()
	for id, cl := range clients {
		wg.Add(1)
		go func(id int, cl *client.Client) {
			defer wg.Done()
			w.client(ctx, id, cl, paths, rand.New(rand.NewSource(seed+int64(id))))
		}(id, cl)
	}
	wg.Wait()
}
