package local_test

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/gofrs/flock"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// BenchmarkOpen measures open+Lock+Unlock+Close of a Mutex handle per
// operation: on a name another handle of the process keeps open (known),
// on a name never used before (fresh), beside a gofrs/flock New+Lock on a
// path and a map of sync.Mutex (what a program keeps without baton).
func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	cycle := func(b *testing.B, be baton.Backend, name string) {
		m, err := be.Mutex(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
	for _, impl := range []local.MutexImpl{local.MutexFutex, local.MutexFlock} {
		b.Run("known/"+string(impl), func(b *testing.B) {
			be, err := local.Open(shmDir(b), local.WithMutex(impl))
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			keep, err := be.Mutex(ctx, "known")
			if err != nil {
				b.Fatal(err)
			}
			defer keep.Close()
			for b.Loop() {
				cycle(b, be, "known")
			}
		})
		b.Run("fresh/"+string(impl), func(b *testing.B) {
			be, err := local.Open(shmDir(b), local.WithMutex(impl))
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			i := 0
			for b.Loop() {
				cycle(b, be, "fresh-"+strconv.Itoa(i))
				i++
			}
		})
	}
	b.Run("gofrs-flock", func(b *testing.B) {
		p := filepath.Join(shmDir(b), "f")
		for b.Loop() {
			l := flock.New(p)
			if err := l.Lock(); err != nil {
				b.Fatal(err)
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("map-sync.Mutex", func(b *testing.B) {
		var (
			mu sync.Mutex
			m  = map[string]*sync.Mutex{}
		)
		for b.Loop() {
			mu.Lock()
			l := m["known"]
			if l == nil {
				l = new(sync.Mutex)
				m["known"] = l
			}
			mu.Unlock()
			l.Lock()
			l.Unlock()
		}
	})
}
