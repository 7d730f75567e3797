// Package demo is the worker program shared by the examples: a parent starts
// worker processes (itself, re-executed) that take turns holding one named
// baton Mutex, each printing its fencing token while it holds. The examples
// differ only in how they open the Backend.
package demo

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/batonlock/baton"
)

// Config is what the parent tells its workers besides the backend.
type Config struct {
	Workers int
	Rounds  int
	Name    string
	Hold    time.Duration
}

// Flags registers the demo's flags on fs and returns the config they fill,
// and the flag that marks a worker process.
func Flags(fs *flag.FlagSet) (*Config, *int) {
	c := &Config{}
	fs.IntVar(&c.Workers, "n", 4, "worker processes")
	fs.IntVar(&c.Rounds, "rounds", 5, "holds per worker")
	fs.StringVar(&c.Name, "name", "demo/workers", "lock name")
	fs.DurationVar(&c.Hold, "hold", 20*time.Millisecond, "how long each hold lasts")
	worker := fs.Int("worker", 0, "run as worker number N (used by the parent)")
	return c, worker
}

// Check refuses a config that cannot run.
func (c *Config) Check() error {
	if c.Workers < 1 || c.Rounds < 1 || c.Hold < 0 {
		return fmt.Errorf("-n and -rounds must be > 0, -hold >= 0")
	}
	return baton.ValidateName(c.Name)
}

// Parent starts the workers, passing each the arguments workerArgs plus its
// number and the config, and waits for them.
func Parent(c *Config, what string, workerArgs ...string) error {
	fmt.Printf("starting %d workers sharing mutex %q on %s\n", c.Workers, c.Name, what)
	var cmds []*exec.Cmd
	for i := 1; i <= c.Workers; i++ {
		args := append(append([]string{}, workerArgs...),
			"-worker", strconv.Itoa(i), "-rounds", strconv.Itoa(c.Rounds),
			"-name", c.Name, "-hold", c.Hold.String())
		cmd := exec.Command(os.Args[0], args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			for _, c := range cmds {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
			return err
		}
		cmds = append(cmds, cmd)
	}
	failed := 0
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d workers failed", failed)
	}
	fmt.Printf("all %d workers done: %d holds, tokens increasing in every worker\n", c.Workers, c.Workers*c.Rounds)
	return nil
}

// Work is one worker: it takes the mutex Rounds times on b.
func Work(b baton.Backend, id int, c *Config) error {
	ctx := context.Background()
	m, err := b.Mutex(ctx, c.Name)
	if err != nil {
		return err
	}
	defer m.Close()
	var last baton.Token
	for r := 0; r < c.Rounds; r++ {
		h, err := m.Lock(ctx)
		if err != nil {
			return err
		}
		if h.Token() <= last {
			return fmt.Errorf("token %d after %d", h.Token(), last)
		}
		last = h.Token()
		fmt.Printf("worker %d (pid %d) holds %q with token %d\n", id, os.Getpid(), c.Name, h.Token())
		select {
		case <-time.After(c.Hold):
		case <-h.Lost():
			return fmt.Errorf("lost the lock while holding: %w", h.Err())
		}
		if err := m.Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}
