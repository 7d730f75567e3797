package etcdlock

import (
	"context"
	"testing"

	"go.etcd.io/etcd/client/v3/concurrency"
)

func BenchmarkZZ(b *testing.B) {
	c := startCluster(b, 1)
	cl := c.client(b)
	ctx := context.Background()
	be, _ := New(cl, WithPrefix("x"))
	defer be.Close()
	m, _ := be.Mutex(ctx, "core")
	s, _ := concurrency.NewSession(cl)
	defer s.Close()
	cm := concurrency.NewMutex(s, "cm/x")
	b.Run("baton", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.Lock(ctx)
			m.Unlock(ctx)
		}
	})
	b.Run("conc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cm.Lock(ctx)
			cm.Unlock(ctx)
		}
	})
}
