package peers

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wardenlock/warden/loadtest"
)

// Redis takes locks with SET key token NX PX ttl and releases them with a
// compare-and-delete script. It has no queue: a blocked Lock retries with
// jittered backoff (1–4 ms), as Redis lock libraries do.
type Redis struct {
	Addr  string
	TTL   time.Duration
	Conns int // pool size

	c *redis.Client
}

var unlockScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// errNotHolder: the key no longer carries our token (it expired).
var errNotHolder = errors.New("redis: lock not held at release")

func (d *Redis) Name() string { return "redis" }

func (d *Redis) client() *redis.Client {
	if d.c == nil {
		d.c = redis.NewClient(&redis.Options{Addr: d.Addr, PoolSize: max(d.Conns, 64)})
	}
	return d.c
}

func (d *Redis) NewClient(ctx context.Context, worker int) (loadtest.Client, error) {
	c := d.client()
	if err := c.Ping(ctx).Err(); err != nil {
		return nil, err
	}
	return &redisClient{c: c, ttl: max(d.TTL, time.Second)}, nil
}

func (d *Redis) Close() error {
	if d.c != nil {
		return d.c.Close()
	}
	return nil
}

func (d *Redis) Version(ctx context.Context) string {
	info, err := d.client().Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return "redis " + strings.TrimSpace(v)
		}
	}
	return ""
}

func (d *Redis) ErrorCode(err error) string { return err.Error() }

type redisClient struct {
	c   *redis.Client
	ttl time.Duration
}

func (r *redisClient) Lock(ctx context.Context, path string) (loadtest.Held, error) {
	var b [16]byte
	_, _ = crand.Read(b[:])
	token := hex.EncodeToString(b[:])
	for {
		ok, err := r.c.SetNX(ctx, path, token, r.ttl).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return &redisHeld{c: r.c, key: path, token: token}, nil
		}
		t := time.NewTimer(time.Millisecond + rand.N(3*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (r *redisClient) Close() error { return nil }

type redisHeld struct {
	c          *redis.Client
	key, token string
}

func (h *redisHeld) Unlock(ctx context.Context) error {
	n, err := unlockScript.Run(ctx, h.c, []string{h.key}, h.token).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return errNotHolder
	}
	return nil
}
