//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"syscall"
	"time"
)

// The kill tables of the RWMutex and the Semaphore: a worker process holds
// the write lock, or the one permit of a capacity-1 semaphore, and is
// SIGKILLed while a waiter of this process is blocked; the time from the
// kill to the waiter holding is measured, as mutex-kill does for a Mutex.

// holdWorker takes what a.Prim names ("rw": the write lock; "sem": one
// permit of a.Permits), says "held" and keeps it until stdin closes or the
// process is killed.
func holdWorker(ctx context.Context, s *subject, a workerArgs, in *bufio.Reader) error {
	var take, give func(context.Context) error
	var closer func() error
	switch a.Prim {
	case "rw":
		if s.rw == nil {
			return fmt.Errorf("no RWMutex of %s", s.name)
		}
		h, err := s.rw(ctx, a.Key)
		if err != nil {
			return err
		}
		take, give, closer = h.lock, h.unlock, h.close
	case "sem":
		if s.sem == nil {
			return fmt.Errorf("no semaphore of %s", s.name)
		}
		h, err := s.sem(ctx, a.Key, a.Permits)
		if err != nil {
			return err
		}
		take, give, closer = h.acquire, h.release, h.close
	default:
		return fmt.Errorf("no hold of %q", a.Prim)
	}
	defer closer()
	if err := take(ctx); err != nil {
		return err
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, in)
	return give(ctx)
}

// killGrant measures, n times, the time from SIGKILL of a worker holding
// prim ("mutex", "rw" or "sem") on key to a waiter of this process holding
// it: a writer for "rw", an Acquire(1) of a capacity-1 semaphore for "sem".
func killGrant(ctx context.Context, s *subject, dir, prim, key string, n int) (sample, error) {
	var w op
	switch prim {
	case "mutex":
		h, err := s.mutex(ctx, key)
		if err != nil {
			return sample{}, err
		}
		w = mutexOp(h)
	case "rw":
		h, err := s.rw(ctx, key)
		if err != nil {
			return sample{}, err
		}
		w = mutexOp(h)
	case "sem":
		h, err := s.sem(ctx, key, 1)
		if err != nil {
			return sample{}, err
		}
		w = semOp(h)
	default:
		return sample{}, fmt.Errorf("no kill table of %q", prim)
	}
	defer w.close()
	var h hist
	for range n {
		// 5 ms: the waiter is blocked by then.
		d, err := killRound(ctx, workerArgs{Role: "hold", Prim: prim, Permits: 1, Subject: s.name, Key: key, Dir: dir}, w.take, 5*time.Millisecond, 30*time.Second)
		if err != nil {
			return sample{}, err
		}
		h.add(d)
		if err := w.give(ctx); err != nil {
			return sample{}, err
		}
	}
	return sample{Ops: int64(n), P50: h.quantile(0.5), P99: h.quantile(0.99), Max: h.max, WorstWait: h.max}, nil
}

// killRound starts a worker with a, which says "held" once it holds, has
// take wait for it in the background, SIGKILLs the worker settle later
// and returns the time from the kill to take returning (within limit).
func killRound(ctx context.Context, a workerArgs, take func(context.Context) error, settle, limit time.Duration) (time.Duration, error) {
	p, err := startWorker(a)
	if err != nil {
		return 0, err
	}
	if err := p.expect("held"); err != nil {
		p.kill()
		return 0, err
	}
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		if err := take(ctx); err != nil {
			errc <- err
			return
		}
		got <- time.Now()
	}()
	time.Sleep(settle)
	t0 := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	defer p.cmd.Wait()
	select {
	case t := <-got:
		return t.Sub(t0), nil
	case err := <-errc:
		return 0, err
	case <-time.After(limit):
		return 0, fmt.Errorf("no waiter held within %v of the holder's death", limit)
	}
}
