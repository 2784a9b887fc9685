package peers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wardenlock/warden/loadtest/harness"
)

// StartEtcd starts a 3-member etcd cluster; clients on base..base+2, peers on
// base+10..base+12.
func StartEtcd(ctx context.Context, base int) (*harness.Group, []string, error) {
	dir, err := os.MkdirTemp("", "etcd-bench-")
	if err != nil {
		return nil, nil, err
	}
	g := &harness.Group{Dir: dir}
	clients, peers := harness.Ports(base, 3), harness.Ports(base+10, 3)
	var initial []string
	for i, p := range peers {
		initial = append(initial, fmt.Sprintf("e%d=http://%s", i+1, p))
	}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("e%d", i+1)
		p, err := harness.Start(ctx, "etcd-"+name, filepath.Join(dir, name+".log"), nil, "etcd",
			"--name", name, "--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", "http://"+clients[i], "--advertise-client-urls", "http://"+clients[i],
			"--listen-peer-urls", "http://"+peers[i], "--initial-advertise-peer-urls", "http://"+peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "bench", "--logger", "zap", "--log-level", "error")
		if err != nil {
			g.Stop()
			return nil, nil, err
		}
		g.Procs = append(g.Procs, p)
	}
	if err := g.WaitTCP(ctx, clients); err != nil {
		g.Stop()
		return nil, nil, err
	}
	return g, clients, nil
}

// StartZooKeeper starts a 3-server ensemble from Debian's zookeeper package;
// clients on base..base+2, quorum and election ports above.
func StartZooKeeper(ctx context.Context, base int) (*harness.Group, []string, error) {
	dir, err := os.MkdirTemp("", "zk-bench-")
	if err != nil {
		return nil, nil, err
	}
	g := &harness.Group{Dir: dir}
	clients := harness.Ports(base, 3)
	var servers strings.Builder
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&servers, "server.%d=127.0.0.1:%d:%d\n", i+1, base+10+i, base+20+i)
	}
	for i := 0; i < 3; i++ {
		d := filepath.Join(dir, fmt.Sprintf("zk%d", i+1))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, err
		}
		_ = os.WriteFile(filepath.Join(d, "myid"), []byte(fmt.Sprintf("%d\n", i+1)), 0o644)
		cfg := fmt.Sprintf("tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxClientCnxns=0\n%s",
			d, base+i, servers.String())
		cfgPath := filepath.Join(d, "zoo.cfg")
		_ = os.WriteFile(cfgPath, []byte(cfg), 0o644)
		_ = os.WriteFile(filepath.Join(d, "log4j.properties"), []byte(
			"log4j.rootLogger=WARN, CONSOLE\nlog4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\nlog4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\nlog4j.appender.CONSOLE.layout.ConversionPattern=%d %p %c: %m%n\n"), 0o644)
		p, err := harness.Start(ctx, fmt.Sprintf("zookeeper%d", i+1), filepath.Join(dir, fmt.Sprintf("zk%d.log", i+1)), nil,
			"java", "-Xmx1g", "-Dzookeeper.log.dir="+d, "-Dlog4j.configuration=file:"+filepath.Join(d, "log4j.properties"),
			"-cp", d+":/usr/share/java/zookeeper.jar", "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath)
		if err != nil {
			g.Stop()
			return nil, nil, err
		}
		g.Procs = append(g.Procs, p)
	}
	if err := g.WaitTCP(ctx, clients); err != nil {
		g.Stop()
		return nil, nil, err
	}
	return g, clients, nil
}

// StartRedis starts one Redis with its defaults for persistence (no AOF,
// no fsync per write) minus RDB snapshots.
func StartRedis(ctx context.Context, port int) (*harness.Group, string, error) {
	dir, err := os.MkdirTemp("", "redis-bench-")
	if err != nil {
		return nil, "", err
	}
	g := &harness.Group{Dir: dir}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := harness.Start(ctx, "redis", filepath.Join(dir, "redis.log"), nil, "redis-server",
		"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err != nil {
		return nil, "", err
	}
	g.Procs = append(g.Procs, p)
	if err := g.WaitTCP(ctx, []string{addr}); err != nil {
		g.Stop()
		return nil, "", err
	}
	return g, addr, nil
}

// SetZooKeeperVersion records the version shown in reports.
func SetZooKeeperVersion(v string) { zkVersion = v }
