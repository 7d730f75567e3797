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
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/etcdlock"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/batonlock/baton/examples/internal/demo"
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
	u, stop, err := serve(*backend)
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

// serve starts a demo server when asked to, and returns the URL workers use.
func serve(backend string) (string, func(), error) {
	switch backend {
	case "redis-server":
		port, err := freePort()
		if err != nil {
			return "", nil, err
		}
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err := cmd.Start(); err != nil {
			return "", nil, fmt.Errorf("start redis-server (install it, or pass -backend redis://host:port): %w", err)
		}
		stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		for deadline := time.Now().Add(5 * time.Second); ; {
			if conn, err := net.Dial("tcp", addr); err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				stop()
				return "", nil, fmt.Errorf("redis-server did not start on %s", addr)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return "redis://" + addr, stop, nil
	case "etcd-embedded":
		dir, err := os.MkdirTemp("", "baton-demo-etcd")
		if err != nil {
			return "", nil, err
		}
		cp, err1 := freePort()
		pp, err2 := freePort()
		if err1 != nil || err2 != nil {
			return "", nil, fmt.Errorf("no free port")
		}
		cfg := embed.NewConfig()
		cfg.Dir = dir
		cfg.LogLevel = "fatal" // start-up failures come back as errors; closing logs noise at "error"
		clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(cp))}
		peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(pp))}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
		cfg.InitialCluster = cfg.Name + "=" + peerURL.String()
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
		stop := func() { e.Close(); os.RemoveAll(dir) }
		select {
		case <-e.Server.ReadyNotify():
		case <-time.After(30 * time.Second):
			stop()
			return "", nil, fmt.Errorf("embedded etcd did not start")
		}
		return "etcd://" + clientURL.Host, stop, nil
	}
	return backend, func() {}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
