package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/internal/linmodel"
)

// runRegister drives the register workload on c's nodes until ctx ends,
// each workload client on its own linked connection.
func runRegister(ctx context.Context, w *linmodel.Register, c *Cluster, seed int64) error {
	var wg sync.WaitGroup
	paths := linmodel.RegisterPaths()
	for id := 0; id < w.Clients; id++ {
		cl, closeCl, err := c.LinkedClient(ctx, fmt.Sprintf("reg-%d", id), id, client.WithRequestTimeout(time.Second),
			client.WithPoolSize(1), client.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
		if err != nil {
			return err
		}
		defer closeCl()
		wg.Add(1)
		go func(id int, cl *client.Client) {
			defer wg.Done()
			w.Client(ctx, id, cl, paths, rand.New(rand.NewSource(seed+int64(id))))
		}(id, cl)
	}
	wg.Wait()
	return nil
}
