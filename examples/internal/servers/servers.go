// Package servers starts throw-away Redis and etcd servers for the examples.
package servers

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Serve starts a demo server when backend asks for one ("redis-server":
// a redis-server from PATH, "etcd-embedded": an etcd in this process, each
// on a free loopback port) and returns its URL and a function that stops it
// and removes its data. Any other backend is returned as it is, with a stop
// that does nothing.
func Serve(backend string) (string, func(), error) {
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
