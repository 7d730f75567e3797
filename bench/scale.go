//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/batonlock/baton/cluster/etcdlock"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// The scale section: how throughput on distinct names grows with the
// servers behind one Backend. Redis Cluster with 1 and 3 masters, etcd
// with 1 and 3 members, each client goroutine on a name of its own.

// scaleGoroutines is how many goroutines, a name each, the scale table
// runs: enough to keep several servers busy from one client process.
const scaleGoroutines = 32

// scaleEnv holds the servers of the scale section.
type scaleEnv struct {
	redis    [][]*redisServer // one Redis Cluster per entry
	etcds    [][]*etcdServer  // one etcd cluster per entry
	closers  []func() error
	subjects []*subject
	logf     func(string, ...any)
}

func openScaleEnv(ctx context.Context, pin pinning, logf func(string, ...any)) (*scaleEnv, error) {
	se := &scaleEnv{logf: logf}
	for _, n := range []int{1, 3} {
		nodes, err := startRedisCluster(ctx, n, pin)
		if err != nil {
			se.close()
			return nil, fmt.Errorf("Redis Cluster of %d: %w", n, err)
		}
		se.redis = append(se.redis, nodes)
		var addrs []string
		for _, s := range nodes {
			addrs = append(addrs, s.addr)
		}
		logf("Redis Cluster of %d master(s) on %s", n, strings.Join(addrs, ", "))
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 64})
		se.closers = append(se.closers, cc.Close)
		b, err := redislock.New(cc)
		if err != nil {
			se.close()
			return nil, err
		}
		se.closers = append(se.closers, b.Close)
		name := fmt.Sprintf("baton redis-cluster %d master%s", n, plural(n))
		se.subjects = append(se.subjects, batonSubject(name, fmt.Sprintf("brc%d", n), "redis", false, b, true, false, false))
	}
	for _, n := range []int{1, 3} {
		members, err := startEtcdCluster(n)
		if err != nil {
			se.close()
			return nil, fmt.Errorf("etcd cluster of %d: %w", n, err)
		}
		se.etcds = append(se.etcds, members)
		var eps []string
		for _, m := range members {
			eps = append(eps, m.addr)
		}
		logf("embedded etcd cluster of %d member(s) on %s", n, strings.Join(eps, ", "))
		c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
		if err != nil {
			se.close()
			return nil, err
		}
		se.closers = append(se.closers, c.Close)
		b, err := etcdlock.New(c)
		if err != nil {
			se.close()
			return nil, err
		}
		se.closers = append(se.closers, b.Close)
		name := fmt.Sprintf("baton etcd %d member%s", n, plural(n))
		se.subjects = append(se.subjects, batonSubject(name, fmt.Sprintf("bec%d", n), "etcd", false, b, true, false, false))
	}
	return se, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func (se *scaleEnv) close() {
	for i := len(se.closers) - 1; i >= 0; i-- {
		_ = se.closers[i]()
	}
	se.closers = nil
	for _, ms := range se.etcds {
		for _, m := range ms {
			m.stop()
		}
	}
	for _, ns := range se.redis {
		for _, s := range ns {
			s.stop()
		}
	}
}

// serverCPU is the CPU time of the Redis Cluster nodes so far (the etcd
// members run inside this process and are counted with it).
func (se *scaleEnv) serverCPU() time.Duration {
	var d time.Duration
	for _, ns := range se.redis {
		for _, s := range ns {
			d += procCPU(s.cmd.Process.Pid)
		}
	}
	return d
}

// logCommandStats logs the server time per call of the scripts and other
// commands each Redis Cluster node ran (INFO commandstats), the per-operation
// server cost the scaling model starts from.
func (se *scaleEnv) logCommandStats(ctx context.Context) {
	for _, ns := range se.redis {
		for _, s := range ns {
			c := redis.NewClient(&redis.Options{Addr: s.addr})
			info, err := c.Info(ctx, "commandstats").Result()
			c.Close()
			if err != nil {
				se.logf("commandstats of %s: %v", s.addr, err)
				continue
			}
			var parts []string
			for l := range strings.SplitSeq(info, "\n") {
				l = strings.TrimSpace(l)
				if name, rest, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(name, "cmdstat_") {
					parts = append(parts, strings.TrimPrefix(name, "cmdstat_")+" "+rest)
				}
			}
			se.logf("commandstats of %s (cluster of %d): %s", s.addr, len(ns), strings.Join(parts, "; "))
		}
	}
}

// startRedisCluster starts n redis-server nodes in cluster mode, gives
// node i the i-th share of the slots, joins them and sets the restart
// markers of every slot (as an operator may on new servers).
func startRedisCluster(ctx context.Context, n int, pin pinning) ([]*redisServer, error) {
	var nodes []*redisServer
	fail := func(err error) ([]*redisServer, error) {
		for _, s := range nodes {
			s.stop()
		}
		return nil, err
	}
	for range n {
		dir, err := os.MkdirTemp("", "baton-bench-cluster-")
		if err != nil {
			return fail(err)
		}
		s, err := startRedisArgs(ctx, pin, "--cluster-enabled", "yes", "--cluster-config-file", dir+"/nodes.conf", "--dir", dir)
		if err != nil {
			os.RemoveAll(dir)
			return fail(err)
		}
		s.dir = dir
		nodes = append(nodes, s)
	}
	for i, s := range nodes {
		c := redis.NewClient(&redis.Options{Addr: s.addr})
		lo, hi := i*16384/n, (i+1)*16384/n-1
		err := c.Do(ctx, "cluster", "addslotsrange", lo, hi).Err()
		if err == nil && i > 0 {
			host, port, _ := strings.Cut(nodes[0].addr, ":")
			err = c.ClusterMeet(ctx, host, port).Err()
		}
		c.Close()
		if err != nil {
			return fail(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range nodes {
		c := redis.NewClient(&redis.Options{Addr: s.addr})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)) {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				return fail(fmt.Errorf("cluster not ok: %v %q", err, info))
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	var addrs []string
	for _, s := range nodes {
		addrs = append(addrs, s.addr)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	seen := make(map[int64]bool)
	_, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; len(seen) < 16384; i++ {
			t := strconv.FormatInt(int64(i), 36)
			if sl := int64(crc16(t) % 16384); !seen[sl] {
				seen[sl] = true
				p.Set(ctx, redislock.DefaultPrefix+"alive:{"+t+"}", "new", 0)
			}
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return nodes, nil
}

// crc16 is CRC-16/XMODEM, the checksum of Redis Cluster's key slots.
func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c ^= uint16(s[i]) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
	}
	return c
}

// startRedisArgs starts one redis-server with extra arguments.
func startRedisArgs(ctx context.Context, pin pinning, extra ...string) (*redisServer, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not on PATH (apt-get install redis-server): %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"}, extra...)
	cmd := pin.command(path, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &redisServer{addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd}
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err = c.Ping(ctx).Err(); err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server did not answer: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startEtcdCluster starts n embedded etcd members forming one cluster, on
// loopback, fsync off (as the single member of the etcd section).
func startEtcdCluster(n int) ([]*etcdServer, error) {
	type member struct {
		name   string
		dir    string
		cu, pu url.URL
	}
	var ms []member
	var initial []string
	for i := range n {
		dir, err := os.MkdirTemp("", "baton-bench-etcd-")
		if err != nil {
			return nil, err
		}
		cp, err := freePort()
		if err != nil {
			return nil, err
		}
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", cp))
		pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", pp))
		m := member{name: "m" + strconv.Itoa(i), dir: dir, cu: *cu, pu: *pu}
		ms = append(ms, m)
		initial = append(initial, m.name+"="+pu.String())
	}
	var out []*etcdServer
	fail := func(err error) ([]*etcdServer, error) {
		for _, s := range out {
			s.stop()
		}
		for _, m := range ms[len(out):] {
			os.RemoveAll(m.dir)
		}
		return nil, err
	}
	for _, m := range ms {
		cfg := embed.NewConfig()
		cfg.Name = m.name
		cfg.Dir = m.dir
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{m.cu}, []url.URL{m.cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{m.pu}, []url.URL{m.pu}
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "baton-bench-scale"
		cfg.LogLevel = "error"
		cfg.LogOutputs = []string{"/dev/null"}
		cfg.UnsafeNoFsync = true
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			return fail(err)
		}
		out = append(out, &etcdServer{e: e, dir: m.dir, addr: m.cu.Host})
	}
	for _, s := range out {
		select {
		case <-s.e.Server.ReadyNotify():
		case <-time.After(30 * time.Second):
			return fail(errors.New("embedded etcd cluster did not become ready"))
		}
	}
	return out, nil
}

// planScale returns the scale table: distinct-name throughput of every
// subject of se, side by side.
func planScale(cfg config, se *scaleEnv) []*plannedTable {
	if len(se.subjects) == 0 {
		return nil
	}
	g := scaleGoroutines
	refs := []string{"baton redis-cluster 1 master", "baton etcd 1 member"}
	t := newPlanned("scale-names", "Scale", fmt.Sprintf("Mutex on distinct names: %d goroutines, a name and a handle each, one Backend", g),
		"throughput", "mutex", refs, se.subjects, distinctRun(g, cfg, se.serverCPU))
	t.done = func() { se.logCommandStats(context.Background()) }
	return networked(t)
}

// distinctRun runs g goroutines, each on a name of its own.
func distinctRun(g int, cfg config, extra func() time.Duration) func(context.Context, *subject) (sample, error) {
	return func(ctx context.Context, s *subject) (sample, error) {
		var ops []op
		for i := range g {
			h, err := s.mutex(ctx, "distinct-"+strconv.Itoa(i))
			if err != nil {
				_ = closeAll(ops)
				return sample{}, err
			}
			ops = append(ops, mutexOp(h))
		}
		defer closeAll(ops)
		if err := warmUp(ctx, ops); err != nil {
			return sample{}, err
		}
		return contended(ctx, ops, nil, 0, cfg.dur, extra)
	}
}
