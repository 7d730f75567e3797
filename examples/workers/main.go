// Command workers starts several worker processes on this machine that share
// one named baton Mutex and take turns holding it, each printing its fencing
// token while it holds. No server is needed: the same-host backend keeps the
// lock in a namespace directory.
//
//	go run ./examples/workers -n 4 -rounds 5
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

func main() {
	n := flag.Int("n", 4, "worker processes")
	rounds := flag.Int("rounds", 5, "holds per worker")
	name := flag.String("name", "demo/workers", "lock name")
	dir := flag.String("dir", "", "namespace directory (default: per-user runtime directory)")
	hold := flag.Duration("hold", 20*time.Millisecond, "how long each hold lasts")
	worker := flag.Int("worker", 0, "run as worker number N (used by the parent)")
	flag.Parse()
	if *n < 1 || *rounds < 1 || *hold < 0 {
		fmt.Fprintln(os.Stderr, "workers: -n and -rounds must be > 0, -hold >= 0")
		os.Exit(64)
	}
	if *worker > 0 {
		if err := work(*worker, *rounds, *name, *dir, *hold); err != nil {
			fmt.Fprintf(os.Stderr, "worker %d: %v\n", *worker, err)
			os.Exit(1)
		}
		return
	}
	fmt.Printf("starting %d workers sharing mutex %q\n", *n, *name)
	var cmds []*exec.Cmd
	for i := 1; i <= *n; i++ {
		cmd := exec.Command(os.Args[0], "-worker", strconv.Itoa(i), "-rounds", strconv.Itoa(*rounds),
			"-name", *name, "-dir", *dir, "-hold", hold.String())
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "workers: %v\n", err)
			os.Exit(1)
		}
		cmds = append(cmds, cmd)
	}
	failed := 0
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "workers: %d workers failed\n", failed)
		os.Exit(1)
	}
	fmt.Printf("all %d workers done: %d holds, tokens increasing in every worker\n", *n, *n**rounds)
}

func work(id, rounds int, name, dir string, hold time.Duration) error {
	ctx := context.Background()
	b, err := local.Open(dir)
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := b.Mutex(ctx, name)
	if err != nil {
		return err
	}
	var last baton.Token
	for r := 0; r < rounds; r++ {
		h, err := m.Lock(ctx)
		if err != nil {
			return err
		}
		if h.Token() <= last {
			return fmt.Errorf("token %d after %d", h.Token(), last)
		}
		last = h.Token()
		fmt.Printf("worker %d (pid %d) holds %q with token %d\n", id, os.Getpid(), name, h.Token())
		time.Sleep(hold)
		if err := m.Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}
