package peers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/wardenlock/warden/loadtest"
)

// ZooKeeper uses go-zookeeper's lock recipe (ephemeral sequential nodes,
// each waiter watching its predecessor) over Conns shared sessions.
// Lock in that library cannot be cancelled, so a ctx only bounds the wait
// from our side: the recipe goes on in the background.
type ZooKeeper struct {
	Servers []string
	Conns   int
	TTL     time.Duration

	mu  sync.Mutex
	cls []*zk.Conn
}

func (d *ZooKeeper) Name() string { return "zookeeper" }

func (d *ZooKeeper) connFor(i int) (*zk.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cls == nil {
		d.cls = make([]*zk.Conn, max(d.Conns, 1))
	}
	k := i % len(d.cls)
	if d.cls[k] == nil {
		c, ev, err := zk.Connect(d.Servers, max(d.TTL, 4*time.Second), zk.WithLogInfo(false), zk.WithLogger(quiet{}))
		if err != nil {
			return nil, err
		}
		deadline := time.After(15 * time.Second)
	wait:
		for {
			select {
			case e := <-ev:
				if e.State == zk.StateHasSession {
					break wait
				}
			case <-deadline:
				c.Close()
				return nil, fmt.Errorf("zookeeper: no session within 15s")
			}
		}
		go func() {
			for range ev {
			}
		}()
		d.cls[k] = c
	}
	return d.cls[k], nil
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func (d *ZooKeeper) NewClient(ctx context.Context, worker int) (loadtest.Client, error) {
	c, err := d.connFor(worker)
	if err != nil {
		return nil, err
	}
	return &zkClient{c: c}, nil
}

func (d *ZooKeeper) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.cls {
		if c != nil {
			c.Close()
		}
	}
	d.cls = nil
	return nil
}

func (d *ZooKeeper) Version(context.Context) string {
	return "zookeeper " + zkVersion
}

// zkVersion is set by the harness from the package it started.
var zkVersion = "?"

func (d *ZooKeeper) ErrorCode(err error) string { return strings.TrimPrefix(err.Error(), "zk: ") }

type zkClient struct{ c *zk.Conn }

func (z *zkClient) Lock(ctx context.Context, path string) (loadtest.Held, error) {
	l := zk.NewLock(z.c, path, zk.WorldACL(zk.PermAll))
	done := make(chan error, 1)
	go func() { done <- l.Lock() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return zkHeld{l}, nil
	case <-ctx.Done():
		go func() {
			if <-done == nil {
				_ = l.Unlock()
			}
		}()
		return nil, ctx.Err()
	}
}

func (z *zkClient) Close() error { return nil }

type zkHeld struct{ l *zk.Lock }

func (h zkHeld) Unlock(context.Context) error { return h.l.Unlock() }

// WatchReleases watches the lock's children: the recipe's nodes disappear on
// release. ZooKeeper watches are one-shot, so each event re-arms the watch.
func (z *zkClient) WatchReleases(ctx context.Context, path string, out chan<- time.Time) error {
	if err := ensurePath(z.c, path); err != nil {
		return err
	}
	kids, _, ch, err := z.c.ChildrenW(path)
	if err != nil {
		return err
	}
	go func() {
		n := len(kids)
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-ch:
				now := time.Now()
				var err error
				var next []string
				next, _, ch, err = z.c.ChildrenW(path)
				if err != nil || ev.Err != nil {
					return
				}
				if len(next) < n {
					select {
					case out <- now:
					default:
					}
				}
				n = len(next)
			}
		}
	}()
	return nil
}

func ensurePath(c *zk.Conn, path string) error {
	p := ""
	for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
		p += "/" + part
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			return err
		}
	}
	return nil
}
