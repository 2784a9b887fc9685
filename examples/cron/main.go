// Command cron shows a leader-elected cron job: several instances campaign
// for one election, and only the leader runs the job on its schedule. Each
// run records its result in a ledger protected by the leadership token, so
// when a leader freezes (its process stops: no keepalives, no progress) and
// a new leader takes over, the old leader's late write is refused.
//
//	go run ./examples/cron -endpoints 127.0.0.1:7070,127.0.0.1:7071,127.0.0.1:7072
package main

import (
	"context"
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

const election = "/cron/nightly-report"

// ledger is where runs are recorded; it admits a write only with a
// leadership token at least as high as any it has seen.
type ledger struct {
	guard *fence.Guard
	mu    sync.Mutex
	runs  []string
}

func (l *ledger) record(token uint64, entry string) error {
	return l.guard.Do(election, token, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.runs = append(l.runs, entry)
		return nil
	})
}

// instance is one cron process: it campaigns, and while it leads it runs
// the job every period with its leadership token.
type instance struct {
	name string
	cl   *client.Client
	e    *client.Election
}

func start(ctx context.Context, name string, endpoints []string) (*instance, error) {
	cl, err := client.New(ctx, endpoints)
	if err != nil {
		return nil, err
	}
	s, err := cl.NewSession(ctx, client.WithTTL(3*time.Second))
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &instance{name: name, cl: cl, e: client.NewElection(s, election, client.WithOwner(name))}, nil
}

// schedule campaigns, then runs job every period while leading, until ctx
// ends or job says stop.
func (in *instance) schedule(ctx context.Context, period time.Duration, job func(run int, token uint64) (stop bool)) error {
	if err := in.e.Campaign(ctx, []byte(in.name)); err != nil {
		return err
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for run := 1; ; run++ {
		token := in.e.Token()
		if token == 0 {
			return fmt.Errorf("%s lost leadership", in.name)
		}
		if job(run, token) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// outcome is what the run shows.
type outcome struct {
	OldToken, NewToken uint64
	StaleErr           error // the frozen leader's late write
	Runs               []string
}

func run(ctx context.Context, endpoints []string, out io.Writer) (outcome, error) {
	var res outcome
	book := &ledger{guard: fence.NewGuard()}
	a, err := start(ctx, "cron-a", endpoints)
	if err != nil {
		return res, err
	}
	defer a.cl.Close()
	b, err := start(ctx, "cron-b", endpoints)
	if err != nil {
		return res, err
	}
	defer b.cl.Close()

	// cron-a campaigns first and leads. Its first run records normally;
	// during its second run the process freezes (modelled by its Warden
	// client going silent: no keepalive is sent, so its session expires),
	// and the run's write is held back until the freeze ends.
	frozen, thaw := make(chan uint64, 1), make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		aDone <- a.schedule(ctx, 50*time.Millisecond, func(n int, token uint64) bool {
			if n == 1 {
				if err := book.record(token, fmt.Sprintf("cron-a run 1 (token %d)", token)); err != nil {
					fmt.Fprintf(out, "cron-a run 1 refused: %v\n", err)
				}
				fmt.Fprintf(out, "cron-a leads with token %d and ran the job\n", token)
				return false
			}
			frozen <- token
			a.cl.Close() // the freeze: keepalives stop
			<-thaw
			res.StaleErr = book.record(token, fmt.Sprintf("cron-a run %d (token %d)", n, token))
			return true
		})
	}()
	res.OldToken = <-frozen
	fmt.Fprintf(out, "cron-a freezes in run 2 holding token %d\n", res.OldToken)

	// cron-b was waiting in the election; once cron-a's session expires it
	// leads, with a higher token, and runs the job.
	err = b.schedule(ctx, 50*time.Millisecond, func(n int, token uint64) bool {
		res.NewToken = token
		if err := book.record(token, fmt.Sprintf("cron-b run %d (token %d)", n, token)); err != nil {
			fmt.Fprintf(out, "cron-b run refused: %v\n", err)
		}
		fmt.Fprintf(out, "cron-b took over with token %d and ran the job\n", token)
		return true
	})
	if err != nil {
		return res, err
	}
	close(thaw)
	<-aDone
	fmt.Fprintf(out, "cron-a thaws and records run 2 with token %d: %v\n", res.OldToken, res.StaleErr)
	book.mu.Lock()
	res.Runs = append([]string(nil), book.runs...)
	book.mu.Unlock()
	fmt.Fprintf(out, "ledger: %q\n", res.Runs)
	return res, nil
}
