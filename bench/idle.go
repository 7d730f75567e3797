//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The idle tables: worker processes blocked behind a holder of this
// process that stays alive; what each uses of the CPU while it waits is
// measured over a window. A waiter that sleeps in the kernel uses none; one
// that wakes to look (a timer slice, a poll) shows it here. The figure of a
// row is CPU time per second of waiting, p50 over the waiters and p99 for
// the worst of them ("raw flock" blocks in flock(2), as flock(1) does).

// idleRun measures n waiters of prim ("mutex", "rw-read", "rw-write" or
// "sem", behind a holder of all 4 permits) over window.
func idleRun(dir, prim string, n int, window time.Duration) func(context.Context, *subject) (sample, error) {
	return func(ctx context.Context, s *subject) (sample, error) {
		release, err := idleHold(ctx, s, prim)
		if err != nil {
			return sample{}, err
		}
		defer release()
		var ws []*worker
		defer func() {
			for _, w := range ws {
				w.kill()
			}
		}()
		for range n {
			w, err := startWorker(workerArgs{Role: "wait", Prim: prim, Permits: 4, Subject: s.name, Key: "idle", Dir: dir})
			if err != nil {
				return sample{}, err
			}
			ws = append(ws, w)
		}
		for _, w := range ws {
			if err := w.expect("waiting"); err != nil {
				return sample{}, err
			}
		}
		time.Sleep(200 * time.Millisecond) // every waiter asleep
		before := make([]time.Duration, n)
		for i, w := range ws {
			before[i] = taskCPU(w.cmd.Process.Pid)
		}
		t0 := time.Now()
		time.Sleep(window)
		el := time.Since(t0)
		perSec := make([]int64, n)
		for i, w := range ws {
			used := taskCPU(w.cmd.Process.Pid) - before[i]
			perSec[i] = int64(float64(used) / el.Seconds())
		}
		slices.Sort(perSec)
		return sample{Ops: int64(n), Seconds: el.Seconds(), P50: perSec[n/2], P99: perSec[(n*99+99)/100-1], Max: perSec[n-1]}, nil
	}
}

// idleHold takes prim on key "idle" in this process: the write lock for
// both RWMutex waiters, all 4 permits of the semaphore.
func idleHold(ctx context.Context, s *subject, prim string) (release func(), err error) {
	switch prim {
	case "mutex":
		h, err := s.mutex(ctx, "idle")
		if err != nil {
			return nil, err
		}
		if err := h.lock(ctx); err != nil {
			h.close()
			return nil, err
		}
		return func() { h.unlock(ctx); h.close() }, nil
	case "rw-read", "rw-write":
		h, err := s.rw(ctx, "idle")
		if err != nil {
			return nil, err
		}
		if err := h.lock(ctx); err != nil {
			h.close()
			return nil, err
		}
		return func() { h.unlock(ctx); h.close() }, nil
	case "sem":
		h, err := s.sem(ctx, "idle", 4)
		if err != nil {
			return nil, err
		}
		for range 4 {
			if err := h.acquire(ctx); err != nil {
				h.close()
				return nil, err
			}
		}
		return func() {
			for range 4 {
				h.release(ctx)
			}
			h.close()
		}, nil
	}
	return nil, fmt.Errorf("no idle table of %q", prim)
}

// waitWorker says "waiting" and blocks in a.Prim until killed.
func waitWorker(ctx context.Context, s *subject, a workerArgs, in *bufio.Reader) error {
	var block func() error
	switch a.Prim {
	case "mutex":
		h, err := s.mutex(ctx, a.Key)
		if err != nil {
			return err
		}
		block = func() error { return h.lock(ctx) }
	case "rw-read", "rw-write":
		h, err := s.rw(ctx, a.Key)
		if err != nil {
			return err
		}
		block = func() error { return h.lock(ctx) }
		if a.Prim == "rw-read" {
			block = func() error { return h.rlock(ctx) }
		}
	case "sem":
		h, err := s.sem(ctx, a.Key, a.Permits)
		if err != nil {
			return err
		}
		block = func() error { return h.acquire(ctx) }
	default:
		return fmt.Errorf("no wait of %q", a.Prim)
	}
	fmt.Println("waiting")
	if err := block(); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, in) // got it as the run ended: until killed
	return nil
}

// taskCPU returns the CPU time of process pid, all its threads, in ns from
// /proc/PID/task/*/schedstat (the ticks of /proc/PID/stat are 10 ms).
func taskCPU(pid int) time.Duration {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			ns, _ := strconv.ParseInt(fs[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}
