package redislock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/cluster/redislock"
	"github.com/redis/go-redis/v9"
)

// A Mutex over one Redis node, with a lease: the hold's context ends if
// the lease cannot be renewed, before another client can take the lock.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	b, err := redislock.New(rdb, lease.WithTTL(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	ctx := context.Background()
	m, err := b.Mutex(ctx, "deploy")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	hold, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	work, stop := hold.Context(ctx)
	defer stop()
	fmt.Println("deploying with fencing token", hold.Token(), work.Err() == nil)
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
}

// By URL through baton.Open, which the package registers for redis://,
// rediss://, redis+cluster:// and rediss+cluster://: TLS with a private
// CA and a client certificate, the password from the environment rather
// than the URL, and lease options in the query.
func ExampleOpenURL() {
	ctx := context.Background()
	b, err := baton.Open(ctx, "rediss://cache.internal:6380/0"+
		"?ca=/etc/baton/ca.pem&cert=/etc/baton/client.pem&key=/etc/baton/client-key.pem"+
		"&password_env=REDIS_PASSWORD&ttl=5s")
	if err != nil {
		log.Fatal(err) // the text never shows a password written in the URL
	}
	defer b.Close()
	s, err := b.Semaphore(ctx, "gpu", 4)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Acquire(ctx, 1); err != nil {
		log.Fatal(err)
	}
	defer s.Release(ctx, 1)
}
