package local_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// TestFutexTokensWhileClosing: goroutines lock and unlock through one
// handle while it is closed under them and opened again, and another
// handle takes turns with them. Close gives back a hold of its handle
// whatever its goroutines are doing, and the futex mutex's tokens come
// from the lock word's bits and a base that moves each round: no token
// given to a caller may repeat, and the other handle's keep growing.
func TestFutexTokensWhileClosing(t *testing.T) {
	b, err := local.Open(namespace(t), local.WithMutex(local.MutexFutex))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	var (
		mu   sync.Mutex
		seen = map[baton.Token]int{}
	)
	record := func(tok baton.Token) {
		mu.Lock()
		seen[tok]++
		mu.Unlock()
	}
	stop := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the other handle
		defer wg.Done()
		m, err := b.Mutex(ctx, "t")
		if err != nil {
			t.Error(err)
			return
		}
		defer m.Close()
		var last baton.Token
		for time.Now().Before(stop) {
			h, err := m.Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if h.Token() <= last {
				t.Errorf("token %d after %d", h.Token(), last)
			}
			last = h.Token()
			record(h.Token())
			if err := m.Unlock(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	rounds := 0
	for time.Now().Before(stop) {
		rounds++
		m, err := b.Mutex(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		var users sync.WaitGroup
		for range 3 {
			users.Add(1)
			go func() {
				defer users.Done()
				for {
					h, err := m.Lock(ctx)
					if err != nil {
						if !errors.Is(err, baton.ErrClosed) {
							t.Error(err)
						}
						return
					}
					record(h.Token())
					if err := m.Unlock(ctx); err != nil && !errors.Is(err, baton.ErrClosed) {
						t.Error(err)
					}
				}
			}()
		}
		time.Sleep(time.Duration(rounds%5) * 100 * time.Microsecond)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		users.Wait()
	}
	wg.Wait()
	for tok, n := range seen {
		if n > 1 {
			t.Errorf("token %d given %d times", tok, n)
		}
	}
	t.Logf("%d tokens in %d rounds of closing", len(seen), rounds)
}
