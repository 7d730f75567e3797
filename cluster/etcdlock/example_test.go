package etcdlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/etcdlock"
	"github.com/batonlock/baton/cluster/lease"
)

// The options are those of every lease backend: the same slice given to
// redislock.New (with a Redis client) gives the same locks on Redis. Only
// the constructor line differs.
func Example() {
	opts := []lease.Option{lease.WithTTL(5 * time.Second), lease.WithPrefix("myapp")}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	b, err := etcdlock.New(cli, opts...) // or: redislock.New(rdb, opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	ctx := context.Background()
	m, err := b.Mutex(ctx, "reports/nightly")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	hold, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Work under a context that ends if the lease is lost, and fence
	// writes with the token.
	wctx, done := hold.Context(ctx)
	fmt.Println("holding with token", hold.Token(), wctx.Err() == nil)
	done()
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
}

// OpenURL reads the same options from the URL's query, by the names every
// lease backend uses; options passed to it take precedence.
func ExampleOpenURL() {
	ctx := context.Background()
	b, err := etcdlock.OpenURL(ctx, "etcd://127.0.0.1:2379/myapp?ttl=5s&renew_every=1s&dial_timeout=2s",
		lease.WithRequestTimeout(2*time.Second))
	if err != nil {
		log.Fatal(err)
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
	_ = s.Release(ctx, 1)
}

// Through baton.Open, with TLS from files and the password read from a
// file: nothing secret is written in the URL, so it can sit in a
// configuration file or the environment.
func Example_open() {
	ctx := context.Background()
	b, err := baton.Open(ctx, "etcds://app@etcd1:2379,etcd2:2379,etcd3:2379/myapp"+
		"?ca=/etc/etcd/ca.pem&cert=/etc/etcd/app.pem&key=/etc/etcd/app-key.pem&password_file=/run/secrets/etcd")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
}
