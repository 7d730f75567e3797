// Command cluster runs the workers of examples/workers on a networked
// backend chosen by flag: the same program, one constructor changed (work
// below has one per backend).
//
//	go run ./examples/cluster -backend redis://127.0.0.1:6379
//	go run ./examples/cluster -backend etcd://127.0.0.1:2379
//	go run ./examples/cluster -backend postgres://user@127.0.0.1:5432/db
//	go run ./examples/cluster -backend mysql://user@127.0.0.1:3306/db
//	go run ./examples/cluster -backend zk://127.0.0.1:2181/prefix
//	go run ./examples/cluster -backend redis-server   # also etcd-embedded, postgres-server, mariadb-server, zookeeper-server
//
// The names in the last line start a throwaway server on a free loopback
// port for the demo (from the machine's packages) and stop it at the end.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/etcdlock"
	"github.com/batonlock/baton/cluster/mysqllock"
	"github.com/batonlock/baton/cluster/pglock"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/batonlock/baton/cluster/zklock"
	"github.com/batonlock/baton/examples/internal/demo"
	"github.com/batonlock/baton/internal/servers"
	"github.com/redis/go-redis/v9"
)

func main() {
	c, worker := demo.Flags(flag.CommandLine)
	backend := flag.String("backend", "etcd-embedded", "redis://…, rediss://…, redis+cluster://…, etcd://…, postgres://…, mysql://…, zk://…, "+
		"or redis-server, etcd-embedded, postgres-server, mariadb-server, zookeeper-server to start a demo server")
	flag.Parse()
	if err := c.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(64)
	}
	if *worker > 0 {
		if err := work(*backend, *worker, c); err != nil {
			fmt.Fprintf(os.Stderr, "worker %d: %v\n", *worker, err)
			os.Exit(1)
		}
		return
	}
	u, stop, err := servers.Serve(*backend)
	if err == nil && *backend == servers.Redis {
		u, err = vouchNew(u)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
	err = demo.Parent(c, u, "-backend", u)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

// vouchNew adds to the URL of the Redis server this program just started
// the server's run id: the backend then need not wait out the leases that a
// server which started empty may have lost, since this one, started here
// and used by no one yet, has given none (redislock.WithRunID).
func vouchNew(u string) (string, error) {
	o, err := redis.ParseURL(u)
	if err != nil {
		return "", err
	}
	c := redis.NewClient(o)
	defer c.Close()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		return "", err
	}
	for l := range strings.Lines(info) {
		if id, ok := strings.CutPrefix(strings.TrimSpace(l), "run_id:"); ok {
			return u + "?run_id=" + id, nil
		}
	}
	return "", fmt.Errorf("%s: INFO server has no run_id", u)
}

func work(u string, id int, c *demo.Config) error {
	ctx := context.Background()
	var (
		b   baton.Backend
		err error
	)
	// The one line that differs from examples/workers, per backend.
	switch scheme, _, _ := strings.Cut(u, ":"); scheme {
	case "etcd", "etcds":
		b, err = etcdlock.OpenURL(ctx, u)
	case "postgres", "postgresql":
		b, err = pglock.OpenURL(ctx, u)
	case "mysql":
		b, err = mysqllock.OpenURL(ctx, u)
	case "zk":
		b, err = zklock.OpenURL(ctx, u)
	default:
		b, err = redislock.OpenURL(ctx, u)
	}
	if err != nil {
		return err
	}
	defer b.Close()
	return demo.Work(b, id, c)
}
