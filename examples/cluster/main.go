// Command cluster runs the workers of examples/workers on a networked
// backend chosen by flag: the same program, one constructor changed.
//
//	go run ./examples/cluster -backend redis://127.0.0.1:6379
//	go run ./examples/cluster -backend etcd://127.0.0.1:2379
//	go run ./examples/cluster -backend redis-server   # starts a redis-server from PATH
//	go run ./examples/cluster -backend etcd-embedded  # starts an embedded etcd
//
// The last two start a throw-away server on a free loopback port for the
// demo and stop it at the end.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/etcdlock"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/batonlock/baton/examples/internal/demo"
	"github.com/batonlock/baton/examples/internal/servers"
)

func main() {
	c, worker := demo.Flags(flag.CommandLine)
	backend := flag.String("backend", "etcd-embedded", "redis://…, rediss://…, redis+cluster://…, redlock://…, etcd://…, or redis-server / etcd-embedded to start a demo server")
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

func work(u string, id int, c *demo.Config) error {
	ctx := context.Background()
	var (
		b   baton.Backend
		err error
	)
	if strings.HasPrefix(u, "etcd") {
		b, err = etcdlock.OpenURL(ctx, u) // the one line that differs from examples/workers
	} else {
		b, err = redislock.OpenURL(ctx, u)
	}
	if err != nil {
		return err
	}
	defer b.Close()
	return demo.Work(b, id, c)
}
