// Command leases runs one program on Redis and then on etcd. Both backends
// read the same lease options, by the same names (package cluster/lease),
// here from the URL's query, so the two differ by their constructor line
// alone (openRedis and openEtcd below); the program itself knows only
// package baton.
//
//	go run ./examples/leases        # throw-away redis-server (from PATH) and embedded etcd
//	go run ./examples/leases -redis redis://127.0.0.1:6379 -etcd etcd://127.0.0.1:2379
//	go run ./examples/leases -redis ""  # etcd only
//
// A redis-server that has just started grants nothing for one TTL (it
// cannot tell a new server from one that lost its data), so the Redis run
// waits that long first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/etcdlock"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/batonlock/baton/internal/servers"
)

// leases are the lease options given to either backend unchanged, as the
// query parameters of package lease.
var leases = lease.ParamTTL + "=5s&" + lease.ParamRenewEvery + "=1s&" + lease.ParamPrefix + "=examples-leases"

func openRedis(ctx context.Context, url string) (baton.Backend, error) {
	return redislock.OpenURL(ctx, withLeases(url))
}

func openEtcd(ctx context.Context, url string) (baton.Backend, error) {
	return etcdlock.OpenURL(ctx, withLeases(url))
}

// withLeases adds the lease options to a backend URL's query.
func withLeases(url string) string {
	if strings.Contains(url, "?") {
		return url + "&" + leases
	}
	return url + "?" + leases
}

func main() {
	redisURL := flag.String("redis", "redis-server", `a redis:// URL, "redis-server" to start one from PATH, or "" to skip`)
	etcdURL := flag.String("etcd", "etcd-embedded", `an etcd:// URL, "etcd-embedded" to start one, or "" to skip`)
	flag.Parse()
	failed := false
	for _, r := range []struct {
		name, url string
		open      func(context.Context, string) (baton.Backend, error)
	}{
		{"redis", *redisURL, openRedis},
		{"etcd", *etcdURL, openEtcd},
	} {
		if r.url == "" {
			continue
		}
		if err := run(r.name, r.url, r.open); err != nil {
			fmt.Fprintf(os.Stderr, "leases: %s: %v\n", r.name, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func run(name, url string, open func(context.Context, string) (baton.Backend, error)) error {
	u, stop, err := servers.Serve(url)
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := open(ctx, u)
	if err != nil {
		return err
	}
	defer b.Close()
	report, err := program(ctx, b)
	if err != nil {
		return err
	}
	fmt.Printf("%-5s %s\n", name+":", report)
	return nil
}

// program is the same on every backend: workers take turns under a Mutex,
// each fencing its work with the hold's token and stopping if the hold is
// lost, and a Semaphore admits two at a time.
func program(ctx context.Context, b baton.Backend) (string, error) {
	const workers, turns = 4, 5
	var (
		mu     sync.Mutex
		tokens []baton.Token // in the order the holds were taken
		wg     sync.WaitGroup
		errs   = make(chan error, workers)
	)
	for range workers {
		m, err := b.Mutex(ctx, "report")
		if err != nil {
			return "", err
		}
		defer m.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range turns {
				hold, err := m.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				// Work under hold.Context: it ends if the hold is lost.
				hctx, done := hold.Context(ctx)
				mu.Lock()
				tokens = append(tokens, hold.Token())
				mu.Unlock()
				err = hctx.Err()
				if uerr := m.Unlock(ctx); err == nil {
					err = uerr
				}
				done()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	var failed []error
	for err := range errs {
		failed = append(failed, err)
	}
	if err := errors.Join(failed...); err != nil {
		return "", err
	}
	increasing := true
	for i := 1; i < len(tokens); i++ {
		increasing = increasing && tokens[i] > tokens[i-1]
	}

	s, err := b.Semaphore(ctx, "slots", 2)
	if err != nil {
		return "", err
	}
	defer s.Close()
	if _, err := s.Acquire(ctx, 2); err != nil {
		return "", err
	}
	other, err := b.Semaphore(ctx, "slots", 2)
	if err != nil {
		return "", err
	}
	defer other.Close()
	_, err = other.TryAcquire(ctx, 1)
	refused := errors.Is(err, baton.ErrLocked)
	if err := s.Release(ctx, 2); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d holds, tokens increasing: %v; semaphore full, a third refused: %v",
		len(tokens), increasing, refused), nil
}
