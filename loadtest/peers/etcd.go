package peers

import (
	"context"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/wardenlock/warden/loadtest"
)

// Etcd drives etcd's concurrency.Mutex and Election: each worker has its own
// session (lease, kept alive by the client) over Conns shared clients.
type Etcd struct {
	Endpoints []string
	Conns     int
	TTL       int // seconds

	mu  sync.Mutex
	cls []*clientv3.Client
}

func (d *Etcd) Name() string { return "etcd" }

func (d *Etcd) clientFor(i int) (*clientv3.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cls == nil {
		d.cls = make([]*clientv3.Client, max(d.Conns, 1))
	}
	k := i % len(d.cls)
	if d.cls[k] == nil {
		c, err := clientv3.New(clientv3.Config{Endpoints: d.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		d.cls[k] = c
	}
	return d.cls[k], nil
}

func (d *Etcd) NewClient(ctx context.Context, worker int) (loadtest.Client, error) {
	c, err := d.clientFor(worker)
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(c, concurrency.WithTTL(max(d.TTL, 5)), concurrency.WithContext(context.Background()))
	if err != nil {
		return nil, err
	}
	return &etcdClient{c: c, s: s}, nil
}

func (d *Etcd) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.cls {
		if c != nil {
			_ = c.Close()
		}
	}
	d.cls = nil
	return nil
}

func (d *Etcd) Version(ctx context.Context) string {
	c, err := d.clientFor(0)
	if err != nil {
		return ""
	}
	st, err := c.Status(ctx, d.Endpoints[0])
	if err != nil {
		return ""
	}
	return "etcd " + st.Version
}

func (d *Etcd) ErrorCode(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "desc = "); i >= 0 {
		msg = msg[i+7:]
	}
	return strings.TrimPrefix(msg, "etcdserver: ")
}

// KeepSessions opens n etcd leases kept alive by the client library.
func (d *Etcd) KeepSessions(ctx context.Context, n int, ttl time.Duration, progress func()) (func() int, func(), error) {
	ss := make([]*concurrency.Session, 0, n)
	for i := 0; i < n; i++ {
		c, err := d.clientFor(i)
		if err != nil {
			return nil, nil, err
		}
		s, err := concurrency.NewSession(c, concurrency.WithTTL(int(ttl.Seconds())), concurrency.WithContext(context.Background()))
		if err != nil {
			for _, s := range ss {
				_ = s.Close()
			}
			return nil, nil, err
		}
		ss = append(ss, s)
		progress()
	}
	alive := func() int {
		k := 0
		for _, s := range ss {
			select {
			case <-s.Done():
			default:
				k++
			}
		}
		return k
	}
	return alive, func() {
		for _, s := range ss {
			_ = s.Close()
		}
	}, nil
}

type etcdClient struct {
	c *clientv3.Client
	s *concurrency.Session
}

func (e *etcdClient) Lock(ctx context.Context, path string) (loadtest.Held, error) {
	m := concurrency.NewMutex(e.s, path)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

func (e *etcdClient) Close() error { return e.s.Close() }

type unlockFunc func(context.Context) error

func (f unlockFunc) Unlock(ctx context.Context) error { return f(ctx) }

func (e *etcdClient) Campaign(ctx context.Context, path, value string) (loadtest.Held, error) {
	el := concurrency.NewElection(e.s, path)
	if err := el.Campaign(ctx, value); err != nil {
		return nil, err
	}
	return unlockFunc(el.Resign), nil
}

// WatchReleases watches the mutex's key prefix; a delete is a release.
func (e *etcdClient) WatchReleases(ctx context.Context, path string, out chan<- time.Time) error {
	wch := e.c.Watch(clientv3.WithRequireLeader(ctx), path+"/", clientv3.WithPrefix(), clientv3.WithFilterPut())
	go func() {
		for wr := range wch {
			now := time.Now()
			for range wr.Events {
				select {
				case out <- now:
				default:
				}
			}
		}
	}()
	return nil
}
