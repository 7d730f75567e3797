package local_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/locktest"
)

// Environment of the handoff child process.
const (
	envHandoffDir  = "BATON_LOCAL_HANDOFF_DIR"
	envHandoffImpl = "BATON_LOCAL_HANDOFF_IMPL"
)

// handoffChild runs in a re-executed test binary: for each "go" on stdin it
// says "w", blocks in Lock, prints the CLOCK_MONOTONIC time at which Lock
// returned, and unlocks.
func handoffChild() int {
	ctx := context.Background()
	b, err := local.Open(os.Getenv(envHandoffDir), local.WithMutex(local.MutexImpl(os.Getenv(envHandoffImpl))))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer b.Close()
	m, err := b.Mutex(ctx, "handoff")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() && in.Text() == "go" {
		fmt.Println("w")
		if _, err := m.Lock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(locktest.Mono())
		if err := m.Unlock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// BenchmarkCrossProcessHandoff measures the time from Unlock in this
// process to Lock returning in a waiter blocked in another process, on the
// system-wide monotonic clock. Reports the median and the maximum.
func BenchmarkCrossProcessHandoff(b *testing.B) {
	for _, impl := range []local.MutexImpl{local.MutexFlock, local.MutexFutex} {
		b.Run("baton-"+string(impl), func(b *testing.B) {
			ctx := context.Background()
			dir := shmDir(b)
			be, err := local.Open(dir, local.WithMutex(impl))
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			m, err := be.Mutex(ctx, "handoff")
			if err != nil {
				b.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envHandoffDir+"="+dir, envHandoffImpl+"="+string(impl))
			cmd.Stderr = os.Stderr
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { stdin.Close(); cmd.Wait() }()
			out := bufio.NewScanner(stdout)
			read := func() string {
				if !out.Scan() {
					b.Fatalf("child: %v", out.Err())
				}
				return strings.TrimSpace(out.Text())
			}
			var lat []time.Duration
			for b.Loop() {
				if _, err := m.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				fmt.Fprintln(stdin, "go")
				read() // "w": the child is about to block
				time.Sleep(2 * time.Millisecond)
				t0 := locktest.Mono()
				if err := m.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
				t1, err := strconv.ParseInt(read(), 10, 64)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Duration(t1-t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "µs-median")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "µs-max")
		})
	}
}
