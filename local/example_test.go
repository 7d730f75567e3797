package local_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// A Mutex shared by the processes of one host: every process that opens
// the same namespace directory and name excludes the others.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "baton-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	b, err := local.Open(dir) // "" for the default namespace of the user
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	ctx := context.Background()
	m, err := b.Mutex(ctx, "cache/rebuild")
	if err != nil {
		log.Fatal(err)
	}
	hold, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token", hold.Token(), "recovered from a dead holder:", hold.Recovered())
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	hold, _ = m.Lock(ctx)
	fmt.Println("next token", hold.Token())
	_ = m.Unlock(ctx)
	// Output:
	// token 1 recovered from a dead holder: false
	// next token 2
}

// The same Backend by URL, through baton.Open: importing local registers
// local: and file:, and nothing of the network backends is linked.
func ExampleOpenURL() {
	dir, err := os.MkdirTemp("", "baton-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	b, err := baton.Open(ctx, "local://"+dir) // or local.OpenURL; "local:" for the default namespace
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	s, err := b.Semaphore(ctx, "gpu", 2)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for i := 1; i <= 3; i++ {
		_, err := s.TryAcquire(ctx, 1)
		fmt.Printf("slot %d: taken=%v busy=%v\n", i, err == nil, errors.Is(err, baton.ErrLocked))
	}
	_ = s.Release(ctx, 2)

	_, err = baton.Open(ctx, "local:relative/dir")
	fmt.Println(errors.Is(err, baton.ErrInvalidArgument))
	// Output:
	// slot 1: taken=true busy=false
	// slot 2: taken=true busy=false
	// slot 3: taken=false busy=true
	// true
}

// flock(2) locks suit files that other tools lock too.
func ExampleWithMutex() {
	dir, err := os.MkdirTemp("", "baton-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	b, err := local.Open(dir, local.WithMutex(local.MutexFlock))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	m, _ := b.Mutex(ctx, "nightly")
	other, _ := b.Mutex(ctx, "nightly") // a second handle stands for another process
	if _, err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = other.TryLock(ctx)
	fmt.Println("second holder refused:", errors.Is(err, baton.ErrLocked))
	_ = m.Unlock(ctx)
	// Output: second holder refused: true
}
