// Command election runs one leader election on the backend chosen by flag:
// the same program on the same host and on Redis or etcd, the constructor
// line (open below) being the only difference.
//
//	go run ./examples/election                          # same host
//	go run ./examples/election -backend redis-server    # a throw-away redis-server from PATH
//	go run ./examples/election -backend etcd-embedded   # a throw-away embedded etcd
//	go run ./examples/election -backend redis://127.0.0.1:6379
//
// Three candidates, each with a Backend of its own as separate processes
// would have, campaign on one name; each leader works for a moment under
// its leadership's context, then resigns, and an observer prints every
// change of leader. A redis-server that has just started grants nothing
// for one TTL (it cannot tell a new server from one that lost its data),
// so the Redis run waits that long first.
package main

import (
	"context"
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
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/recipe"
)

// open is the one line that differs between backends.
func open(ctx context.Context, backend, dir string) (baton.Backend, error) {
	switch {
	case backend == "local":
		return local.Open(dir)
	case strings.HasPrefix(backend, "etcd"):
		return etcdlock.OpenURL(ctx, backend, lease.WithTTL(5*time.Second))
	default:
		return redislock.OpenURL(ctx, backend, lease.WithTTL(2*time.Second))
	}
}

func main() {
	backend := flag.String("backend", "local", `"local", a redis:// or etcd:// URL, or redis-server / etcd-embedded to start a demo server`)
	flag.Parse()
	u, stop, err := servers.Serve(*backend)
	if err != nil {
		fmt.Fprintln(os.Stderr, "election:", err)
		os.Exit(1)
	}
	err = run(u)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "election:", err)
		os.Exit(1)
	}
}

// join opens a Backend of its own and the election on it, as a process of
// its own would; leave closes both.
func join(ctx context.Context, backend, dir, name string) (el *recipe.Election, leave func(), err error) {
	b, err := open(ctx, backend, dir)
	if err != nil {
		return nil, nil, err
	}
	if el, err = recipe.NewElection(ctx, b, name); err != nil {
		b.Close()
		return nil, nil, err
	}
	return el, func() { el.Close(); b.Close() }, nil
}

func run(backend string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "baton-election")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	name := fmt.Sprintf("examples/election/%d", os.Getpid())

	observer, leave, err := join(ctx, backend, dir, name)
	if err != nil {
		return err
	}
	defer leave()
	octx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		for l, err := range observer.Observe(octx) {
			switch {
			case err != nil:
				fmt.Println("observe:", err)
			case l.Token == 0:
				fmt.Println("observer: no leader")
			default:
				fmt.Printf("observer: leader %s (token %d)\n", l.Value, l.Token)
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		el, leave, err := join(ctx, backend, dir, name)
		if err != nil {
			return err
		}
		defer leave()
		wg.Go(func() {
			me := fmt.Sprintf("candidate-%d", i)
			l, err := el.Campaign(ctx, []byte(me)) // waits until leader
			if err != nil {
				errs <- err
				return
			}
			work, done := l.Context(ctx) // ends if the leadership is lost
			select {
			case <-work.Done():
				fmt.Printf("%s: leadership lost: %v\n", me, context.Cause(work))
			case <-time.After(200 * time.Millisecond):
			}
			done()
			if err := l.Resign(ctx); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // let the observer see the last resignation
	stopObserving()
	<-observed
	close(errs)
	for err := range errs {
		return err
	}
	return nil
}
