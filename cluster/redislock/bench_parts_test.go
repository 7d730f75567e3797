package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/driver"
	"github.com/redis/go-redis/v9"
)

// setNXScript is SET NX PX run as a script: the raw floor's acquisition
// plus the cost of running a script rather than a command.
var setNXScript = redis.NewScript(`return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`)

// BenchmarkUncontendedParts splits an uncontended Lock+Unlock into its
// layers, alternated on one server so that all meet the same load:
//
//	floor    SET NX PX, then compare-and-delete by EVALSHA (the raw floor)
//	lua      the same SET NX PX run as a script: what a script costs
//	scripts  mutex_acquire and mutex_release by EVALSHA, nothing else
//	driver   the driver's Acquire and Release: ids, keys, the lease keeper
//	baton    Mutex.Lock and Unlock: the core on top
//
// Each reports its median as "NAME-p50-µs", and its ratio to the floor.
func BenchmarkUncontendedParts(b *testing.B) {
	s := startRedis(b)
	c := s.Client()
	ctx := context.Background()
	bk := benchBackend(b, s.URL(""))
	m, err := bk.Mutex(ctx, "parts-baton")
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	d, err := newDriver(c, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	dl, err := d.OpenMutex(ctx, "parts-driver")
	if err != nil {
		b.Fatal(err)
	}
	q := &dl.(*mutexDriver).queued
	keys := mutexKeys(DefaultPrefix, "parts-scripts", DefaultPrefix+"alive")
	ttl := (10 * time.Second).Milliseconds()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	names := []string{"floor", "lua", "scripts", "driver", "baton"}
	p50 := alternate(b, names,
		func() { rawCycle(b, ctx, c) },
		func() {
			v := redisnode.NewID()
			must(setNXScript.Run(ctx, c, []string{"rawlua"}, v, ttl).Err())
			must(rawUnlock.Run(ctx, c, []string{"rawlua"}, v).Err())
		},
		func() {
			id := d.holdID()
			ok, _, err := pair(scriptMutexAcquire.Run(ctx, c, keys, id, ttl, d.meta, time.Now().UnixMilli(), d.wake).Result())
			if !ok || err != nil {
				b.Fatal(ok, err)
			}
			if r, err := scriptMutexRelease.Run(ctx, c, keys, id).Int64(); r != 1 || err != nil {
				b.Fatal(r, err)
			}
		},
		func() {
			g, err := q.Acquire(ctx, driver.Exclusive)
			must(err)
			must(q.Release(ctx, g))
		},
		func() { lockUnlock(b, m) })
	for i, p := range p50 {
		if i > 0 {
			b.ReportMetric(float64(p)/float64(p50[0]), names[i]+"-x-floor")
		}
	}
}
