package baton_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

func Example() {
	dir, _ := os.MkdirTemp("", "baton-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	b, err := local.Open(dir) // same host; redislock.OpenURL or etcdlock.OpenURL for a cluster
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	m, _ := b.Mutex(ctx, "cache/rebuild")

	hold, err := m.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("token:", hold.Token())
	// Another handle (or process) cannot take it now.
	other, _ := b.Mutex(ctx, "cache/rebuild")
	_, err = other.TryLock(ctx)
	fmt.Println("other:", errors.Is(err, baton.ErrLocked))
	fmt.Println("unlock:", m.Unlock(ctx))
	hold, _ = other.Lock(ctx)
	fmt.Println("next token:", hold.Token())
	_ = other.Unlock(ctx)
	// Output:
	// token: 1
	// other: true
	// unlock: <nil>
	// next token: 2
}

func ExampleWithOwner() {
	dir, _ := os.MkdirTemp("", "baton-example")
	defer os.RemoveAll(dir)
	b, _ := local.Open(dir)
	defer b.Close()
	ctx := baton.WithOwner(context.Background())
	m, _ := b.Mutex(ctx, "reentrant")

	_, _ = m.Lock(ctx)
	_, err := m.Lock(ctx) // the same owner: the hold count goes to 2
	fmt.Println("second lock:", err)
	fmt.Println(m.Unlock(ctx), m.Unlock(ctx))
	fmt.Println("third unlock:", errors.Is(m.Unlock(ctx), baton.ErrNotHeld))
	// Output:
	// second lock: <nil>
	// <nil> <nil>
	// third unlock: true
}

func ExampleRWMutex_Downgrade() {
	dir, _ := os.MkdirTemp("", "baton-example")
	defer os.RemoveAll(dir)
	b, _ := local.Open(dir)
	defer b.Close()
	ctx := context.Background()
	rw, _ := b.RWMutex(ctx, "index")
	reader, _ := b.RWMutex(ctx, "index")
	// On one host an RWMutex lives in shared memory, in a file of the
	// namespace. With local.WithRWMutex(local.RWSysV) it is a System V
	// semaphore set instead, which outlives the process and the directory;
	// Remove (as baton rm does) removes either.
	defer b.(baton.Inspector).Remove(ctx, baton.KindRWMutex, "index")

	_, _ = rw.Lock(ctx)
	// ... rebuild the index ...
	h, _ := rw.Downgrade(ctx) // no writer can slip in between
	fmt.Println("mode:", h.Mode())
	_, err := reader.TryRLock(ctx)
	fmt.Println("reader:", err)
	_, err = reader.TryLock(ctx)
	fmt.Println("writer:", errors.Is(err, baton.ErrLocked))
	_ = reader.RUnlock(ctx)
	_ = rw.RUnlock(ctx)
	// Output:
	// mode: shared
	// reader: <nil>
	// writer: true
}
