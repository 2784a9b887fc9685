// Command inventory shows a stock reservation protected by a Warden lock and
// its fencing token: a worker that is paused while it holds the lock (a GC
// pause, a VM migration) loses the lock when its lease runs out, another
// worker reserves stock meanwhile, and the paused worker's late write is
// refused by the warehouse because its token is stale.
//
//	go run ./examples/inventory -endpoints 127.0.0.1:7070,127.0.0.1:7071,127.0.0.1:7072
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/wardenlock/warden/client"
	"github.com/wardenlock/warden/fence"
)

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:7070,127.0.0.1:7071,127.0.0.1:7072", "Warden nodes")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := run(ctx, strings.Split(*endpoints, ","), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// warehouse is the protected resource. It knows nothing about Warden except
// the fencing rule: a write carries the lock's token, and a token below the
// highest already seen for that item is refused.
type warehouse struct {
	guard *fence.Guard
	mu    sync.Mutex
	stock map[string]int
	log   []string
}

var errOutOfStock = errors.New("out of stock")

func (w *warehouse) level(sku string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stock[sku]
}

func (w *warehouse) reserve(sku string, token uint64, qty int, who string) error {
	return w.guard.Do("/inventory/"+sku, token, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.stock[sku] < qty {
			return errOutOfStock
		}
		w.stock[sku] -= qty
		w.log = append(w.log, fmt.Sprintf("%s reserved %d of %s (token %d)", who, qty, sku, token))
		return nil
	})
}

// outcome is what the run shows.
type outcome struct {
	StaleToken, FreshToken uint64
	StaleErr               error // the paused worker's write: refused
	Stock                  int   // what is left
	Log                    []string
}

func run(ctx context.Context, endpoints []string, out io.Writer) (outcome, error) {
	const sku, path = "sku-42", "/inventory/sku-42"
	wh := &warehouse{guard: fence.NewGuard(), stock: map[string]int{sku: 10}}
	var res outcome

	workerA, err := client.New(ctx, endpoints)
	if err != nil {
		return res, err
	}
	defer workerA.Close()
	workerB, err := client.New(ctx, endpoints)
	if err != nil {
		return res, err
	}
	defer workerB.Close()

	// Worker A takes the lock with a 1 s lease, reads the stock level and
	// decides to reserve 3, then is paused before it writes. Paused, it
	// renews nothing: its lease runs out.
	lockA, err := workerA.Acquire(ctx, path, time.Second)
	if err != nil {
		return res, err
	}
	res.StaleToken = lockA.Token()
	fmt.Fprintf(out, "worker A holds %s with token %d; sees %d in stock; pauses\n", path, lockA.Token(), wh.level(sku))

	// Worker B waits in the lock's queue and is granted the lock once A's
	// lease has expired, with a higher token. It reserves 4.
	lockB, err := workerB.Acquire(ctx, path, 10*time.Second)
	if err != nil {
		return res, err
	}
	res.FreshToken = lockB.Token()
	if err := wh.reserve(sku, lockB.Token(), 4, "worker B"); err != nil {
		return res, fmt.Errorf("worker B: %w", err)
	}
	fmt.Fprintf(out, "worker B got the lock with token %d after A's lease expired; reserved 4\n", lockB.Token())
	if err := lockB.Release(ctx); err != nil {
		return res, err
	}

	// Worker A wakes up and writes what it decided before the pause. The
	// warehouse refuses: A's token is older than one it has seen.
	res.StaleErr = wh.reserve(sku, lockA.Token(), 3, "worker A")
	fmt.Fprintf(out, "worker A wakes up and reserves 3 with token %d: %v\n", lockA.Token(), res.StaleErr)
	if err := lockA.Release(ctx); err != nil {
		fmt.Fprintf(out, "worker A's release: %v (its lock had already expired)\n", err)
	}
	res.Stock, res.Log = wh.level(sku), wh.log
	fmt.Fprintf(out, "stock left: %d\n", res.Stock)
	return res, nil
}
