package baton_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// A counter that several processes increment: read, compute, and write
// back against the version read, again on ErrConflict.
func ExampleValue() {
	dir, _ := os.MkdirTemp("", "baton-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	b, _ := local.Open(dir) // redislock.OpenURL or etcdlock.OpenURL for a cluster
	defer b.Close()
	v, _ := b.Value(ctx, "jobs/done")

	increment := func() error {
		for {
			data, ver, err := v.Load(ctx)
			if err != nil {
				return err
			}
			n, _ := strconv.Atoi(string(data)) // never written: nil data, 0
			_, err = v.CompareAndSwap(ctx, ver, []byte(strconv.Itoa(n+1)))
			if !errors.Is(err, baton.ErrConflict) {
				return err // nil: written
			}
		}
	}

	// Another handle (or process) waits for the next change.
	watcher, _ := b.Value(ctx, "jobs/done")
	_, ver, _ := watcher.Load(ctx)
	changed := make(chan string)
	go func() {
		data, _, _ := watcher.Wait(ctx, ver)
		changed <- string(data)
	}()

	fmt.Println(increment(), increment())
	fmt.Println("seen by the watcher:", <-changed != "")
	data, _, _ := v.Load(ctx)
	fmt.Println("count:", string(data))
	_, err := v.CompareAndSwap(ctx, ver, []byte("stale"))
	fmt.Println("write from an old version:", errors.Is(err, baton.ErrConflict))
	// Output:
	// <nil> <nil>
	// seen by the watcher: true
	// count: 2
	// write from an old version: true
}
