package fence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/fence"
)

// A service that stores writes from clients keeps one Guard per resource;
// each write carries the writer's Hold.Token.
func ExampleGuard() {
	var g fence.Guard
	var stored string
	put := func(token baton.Token, v string) error {
		return g.Do(token, func() error { stored = v; return nil })
	}
	fmt.Println(put(7, "from the holder of token 7"))
	fmt.Println(put(9, "from the next holder"))
	err := put(7, "late, from a paused ex-holder")
	fmt.Println(errors.Is(err, fence.ErrStale), errors.Is(err, baton.ErrLost))
	fmt.Println(stored)
	// Output:
	// <nil>
	// <nil>
	// true true
	// from the next holder
}

// Processes of one host that write a file keep the fence beside it.
func ExampleFile() {
	dir, _ := os.MkdirTemp("", "fence-example")
	defer os.RemoveAll(dir)
	f, err := fence.OpenFile(filepath.Join(dir, "report.fence"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	ctx := context.Background()
	write := func(token baton.Token, v string) error {
		return f.Do(ctx, token, func() error {
			return os.WriteFile(filepath.Join(dir, "report"), []byte(v), 0o644)
		})
	}
	fmt.Println(write(12, "twelve"))
	fmt.Println(write(11, "eleven"))
	b, _ := os.ReadFile(filepath.Join(dir, "report"))
	fmt.Println(string(b))
	// Output:
	// <nil>
	// fence: stale token 11: a holder with token 12 has written since
	// twelve
}
