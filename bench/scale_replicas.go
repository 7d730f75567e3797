//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/redis/go-redis/v9"
)

// The cost of a grant that survives a failover: one master with one
// replica, the same Backend options but for WithReplicas(1), which adds a
// WAIT for the replica's acknowledgement to every grant and renewal.

// replicaEnv is the master, its replica and the two subjects on them.
type replicaEnv struct {
	master, replica *redisServer
	subjects        []*subject
	closers         []func() error
}

func openReplicaEnv(ctx context.Context, pin pinning, logf func(string, ...any)) (*replicaEnv, error) {
	re := &replicaEnv{}
	var err error
	// Each in a directory of its own: a full sync writes an RDB file.
	if re.master, err = startRedisInDir(ctx, pin); err != nil {
		return nil, err
	}
	host, port, _ := strings.Cut(re.master.addr, ":")
	if re.replica, err = startRedisInDir(ctx, pin, "--replicaof", host, port); err != nil {
		re.close()
		return nil, err
	}
	if err := waitReplicaLink(ctx, re.master.addr); err != nil {
		re.close()
		return nil, err
	}
	logf("Redis master %s with replica %s", re.master.addr, re.replica.addr)
	for _, v := range []struct {
		name string
		id   string
		opts []lease.Option
	}{
		{"baton redis master+replica", "brm0", nil},
		{"baton redis master+replica replicas=1", "brm1", []lease.Option{redislock.WithReplicas(1)}},
	} {
		c := redis.NewClient(&redis.Options{Addr: re.master.addr, PoolSize: 64})
		re.closers = append(re.closers, c.Close)
		b, err := redislock.New(c, v.opts...)
		if err != nil {
			re.close()
			return nil, err
		}
		re.closers = append(re.closers, b.Close)
		re.subjects = append(re.subjects, batonSubject(v.name, v.id, "redis", false, b, true, false, false))
	}
	return re, nil
}

// startRedisInDir starts a redis-server whose files go to a new directory,
// removed when it stops.
func startRedisInDir(ctx context.Context, pin pinning, extra ...string) (*redisServer, error) {
	dir, err := os.MkdirTemp("", "baton-bench-replica-")
	if err != nil {
		return nil, err
	}
	s, err := startRedisArgs(ctx, pin, append([]string{"--dir", dir}, extra...)...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.dir = dir
	return s, nil
}

// waitReplicaLink returns once the master counts one connected replica
// that has finished its first sync, so that WAIT 1 can be answered.
func waitReplicaLink(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica of %s not online: %v %q", addr, err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (re *replicaEnv) close() {
	for i := len(re.closers) - 1; i >= 0; i-- {
		_ = re.closers[i]()
	}
	re.closers = nil
	for _, s := range []*redisServer{re.replica, re.master} {
		if s != nil {
			s.stop()
		}
	}
}

func (re *replicaEnv) serverCPU() time.Duration {
	return procCPU(re.master.cmd.Process.Pid) + procCPU(re.replica.cmd.Process.Pid)
}

// planReplicas returns the WAIT-cost table: uncontended Lock+Unlock with
// and without the replica's acknowledgement, side by side.
func planReplicas(cfg config, re *replicaEnv) []*plannedTable {
	if re == nil || len(re.subjects) == 0 {
		return nil
	}
	t := newPlanned("scale-replicas", "Scale", "Mutex, uncontended Lock+Unlock on a master with one replica: the cost of waiting for its acknowledgement",
		"throughput", "mutex", []string{"baton redis master+replica"}, re.subjects,
		uncontendedRun("mutex", "replicas", 0, cfg, re.serverCPU))
	return networked(t)
}
