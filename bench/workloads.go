//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// config is the size of a pass.
type config struct {
	dur        time.Duration // one measured run of one subject
	reps       int           // fewest runs of each subject, interleaved with its peers
	maxReps    int           // most runs, while a ratio's interval is wider than ±target
	netReps    int           // reps and maxReps of the networked tables
	netMaxReps int
	target     float64       // half-width of the intervals aimed at, as a fraction
	gs         []int         // goroutine counts on one key
	ps         []int         // process counts on one key (Mutex)
	semPs      []int         // process counts on a capacity-1 Semaphore
	permits    []int         // semaphore capacities (4N contenders each)
	rwG        int           // goroutines of the read-heavy RWMutex run
	handoffs   int           // handoffs per run
	kills      int           // holder kills per run
	memK       int           // handles opened per memory run
	opens      int           // handles opened per run of the open tables
	residue    int           // distinct names of the residue run
	poll       time.Duration // retry delay of the polling peers
	idleWindow time.Duration // CPU of waiting processes measured over this
	idleSem    int           // waiters behind a Semaphore of 4
}

// The quick pass has the workloads of the full one, shorter and with
// fewer repetitions, so that the two compare table by table.
var quickConfig = config{
	dur: 100 * time.Millisecond, reps: 5, maxReps: 5, netReps: 5, netMaxReps: 9, target: 0.10,
	gs: []int{1, 4, 16}, ps: []int{2, 4}, semPs: []int{4},
	permits: []int{1, 4, 16}, rwG: 16, handoffs: 20, kills: 3, memK: 100, opens: 2000, residue: 10_000, poll: 10 * time.Millisecond,
	idleWindow: time.Second, idleSem: 64,
}

var fullConfig = config{
	dur: time.Second, reps: 5, maxReps: 9, netReps: 7, netMaxReps: 15, target: 0.10,
	gs: []int{1, 4, 16}, ps: []int{2, 4}, semPs: []int{4},
	permits: []int{1, 4, 16}, rwG: 16, handoffs: 50, kills: 10, memK: 500, opens: 10_000, residue: 100_000, poll: 10 * time.Millisecond,
	idleWindow: 5 * time.Second, idleSem: 64,
}

// smokeConfig is the tiny pass of the package test.
var smokeConfig = config{
	dur: 20 * time.Millisecond, reps: 3, maxReps: 3, netReps: 3, netMaxReps: 3, target: 0.10,
	gs: []int{4}, ps: []int{2}, semPs: []int{2},
	permits: []int{2}, rwG: 4, handoffs: 3, kills: 1, memK: 10, opens: 20, residue: 50, poll: 2 * time.Millisecond,
	idleWindow: 100 * time.Millisecond, idleSem: 2,
}

// cpuNow returns the CPU time (user + system) of this process plus extra,
// the CPU of servers that work for the subjects (see clusterEnv).
func cpuNow(extra func() time.Duration) time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if extra != nil {
		d += extra()
	}
	return d
}

// procCPU reads the user + system time of process pid from /proc.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// op is one measured operation: take (whose duration is the wait) and
// give back.
type op struct {
	take, give func(ctx context.Context) error
	close      func() error
}

func mutexOp(h mutexH) op { return op{h.lock, h.unlock, h.close} }
func readOp(h rwH) op     { return op{h.rlock, h.runlock, h.close} }
func semOp(h semH) op     { return op{h.acquire, h.release, h.close} }
func closeAll(ops []op) error {
	var errs []error
	for _, o := range ops {
		errs = append(errs, o.close())
	}
	return errors.Join(errs...)
}

// warmUp runs a few cycles on every handle in turn, then one on all of
// them at once, before anything is timed: connections are dialled, pools
// grown to the number of contenders and server-side scripts loaded. The
// ops in seq (another side of the same handles) only run in turn.
func warmUp(ctx context.Context, ops []op, seq ...op) error {
	for _, o := range append(slices.Clone(ops), seq...) {
		for range 3 {
			if err := cycle(ctx, o); err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	if len(ops) < 2 {
		return nil
	}
	errs := make([]error, len(ops))
	var wg sync.WaitGroup
	for i, o := range ops {
		wg.Go(func() { errs[i] = cycle(ctx, o) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// uncontended measures take+give on one handle with nobody else: first
// without per-operation timing (throughput and CPU), then with it
// (latency), each for half of the run.
func uncontended(ctx context.Context, o op, dur time.Duration, extra func() time.Duration) (sample, error) {
	// Warm up and find a batch that takes about a millisecond, so that
	// reading the clock (slow on some virtual machines) stays out of the
	// throughput figure.
	batch := 1
	for {
		t := time.Now()
		for range batch {
			if err := cycle(ctx, o); err != nil {
				return sample{}, err
			}
		}
		if time.Since(t) >= time.Millisecond || batch >= 1<<20 {
			break
		}
		batch *= 2
	}
	c0 := cpuNow(extra)
	t0 := time.Now()
	var ops int64
	for time.Since(t0) < dur/2 {
		for range batch {
			if err := o.take(ctx); err != nil {
				return sample{}, err
			}
			if err := o.give(ctx); err != nil {
				return sample{}, err
			}
		}
		ops += int64(batch)
	}
	el := time.Since(t0)
	cpu := cpuNow(extra) - c0

	var h, w hist
	t0 = time.Now()
	for time.Since(t0) < dur/2 {
		a := time.Now()
		if err := o.take(ctx); err != nil {
			return sample{}, err
		}
		b := time.Now()
		if err := o.give(ctx); err != nil {
			return sample{}, err
		}
		h.add(time.Since(a))
		w.add(b.Sub(a))
	}
	return sample{
		Ops: ops, Seconds: el.Seconds(), Throughput: float64(ops) / el.Seconds(),
		P50: h.quantile(0.5), P99: h.quantile(0.99), Max: h.max, WorstWait: w.max,
		CPUPerOp: int64(cpu) / max(ops, 1),
	}, nil
}

func cycle(ctx context.Context, o op) error {
	if err := o.take(ctx); err != nil {
		return err
	}
	return o.give(ctx)
}

// loopResult is what one contender measured.
type loopResult struct {
	ops     int64 // all operations, both halves
	untimed int64 // operations in the untimed half
	untSec  float64
	cycle   hist // take + give, timed half
	wait    hist // take alone, timed half
	err     error
}

// contend runs take+give on o from start for dur: untimed for the first
// half (throughput and fairness, with the clock read once per batch: it
// costs 60 ns on some virtual machines, more than a futex lock), then
// recording every operation (latency, worst wait). Operations in flight at
// the end finish and are counted: a waiter that starved through the whole
// run still reports its wait.
func contend(ctx context.Context, o op, start time.Time, dur time.Duration, writeEvery int, w op) *loopResult {
	r := &loopResult{}
	mid, deadline := start.Add(dur/2), start.Add(dur)
	pick := func(i int) op {
		if writeEvery > 0 && i%writeEvery == writeEvery-1 {
			return w
		}
		return o
	}
	i, batch := 0, 1
	for {
		b0 := time.Now()
		if !b0.Before(mid) {
			break
		}
		for range batch {
			if err := cycle(ctx, pick(i)); err != nil {
				r.err = err
				return r
			}
			i++
		}
		r.untimed += int64(batch)
		if time.Since(b0) < 100*time.Microsecond && batch < 1<<12 {
			batch *= 2
		}
	}
	r.untSec = time.Since(start).Seconds()
	r.ops = r.untimed
	for ; time.Now().Before(deadline); i++ {
		cur := pick(i)
		a := time.Now()
		if err := cur.take(ctx); err != nil {
			r.err = err
			return r
		}
		b := time.Now()
		if err := cur.give(ctx); err != nil {
			r.err = err
			return r
		}
		r.cycle.add(time.Since(a))
		r.wait.add(b.Sub(a))
		r.ops++
	}
	return r
}

// contended runs len(ops) goroutines, each with its own handle, on one
// key. With writeEvery > 0, every writeEvery-th operation of a goroutine
// uses writes[i] instead (the read-heavy RWMutex run).
func contended(ctx context.Context, ops []op, writes []op, writeEvery int, dur time.Duration, extra func() time.Duration) (sample, error) {
	res := make([]*loopResult, len(ops))
	var wg sync.WaitGroup
	startGate := make(chan struct{})
	c0 := cpuNow(extra)
	t0 := time.Now()
	for i := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGate
			var w op
			if writes != nil {
				w = writes[i]
			}
			res[i] = contend(ctx, ops[i], t0, dur, writeEvery, w)
		}()
	}
	close(startGate)
	wg.Wait()
	el := time.Since(t0)
	cpu := cpuNow(extra) - c0
	return mergeResults(res, el, cpu)
}

func mergeResults(res []*loopResult, el, cpu time.Duration) (sample, error) {
	var all, wait hist
	var ops, untimed int64
	var untSec float64
	minOps, maxOps := int64(-1), int64(0)
	for _, r := range res {
		if r.err != nil {
			return sample{}, r.err
		}
		all.merge(&r.cycle)
		wait.merge(&r.wait)
		ops += r.ops
		untimed += r.untimed
		untSec = max(untSec, r.untSec)
		if minOps < 0 || r.untimed < minOps {
			minOps = r.untimed
		}
		maxOps = max(maxOps, r.untimed)
	}
	s := sample{
		Ops: untimed, Seconds: untSec, Throughput: float64(untimed) / untSec,
		P50: all.quantile(0.5), P99: all.quantile(0.99), Max: all.max, WorstWait: wait.max,
		CPUPerOp: int64(cpu) / max(ops, 1),
	}
	if maxOps > 0 {
		s.Fairness = float64(minOps) / float64(maxOps)
	}
	return s, nil
}

// handoff measures, n times, the time from the holder's Unlock call to a
// waiter (another handle, blocked in Lock for settle) holding the lock.
func handoff(ctx context.Context, holder, waiter mutexH, n int, settle time.Duration) (sample, error) {
	var h hist
	for range n {
		if err := holder.lock(ctx); err != nil {
			return sample{}, err
		}
		got := make(chan time.Time, 1)
		errc := make(chan error, 1)
		go func() {
			if err := waiter.lock(ctx); err != nil {
				errc <- err
				return
			}
			got <- time.Now()
		}()
		time.Sleep(settle)
		rel := time.Now()
		if err := holder.unlock(ctx); err != nil {
			return sample{}, err
		}
		select {
		case t := <-got:
			h.add(t.Sub(rel))
		case err := <-errc:
			return sample{}, err
		}
		if err := waiter.unlock(ctx); err != nil {
			return sample{}, err
		}
	}
	return sample{Ops: int64(n), P50: h.quantile(0.5), P99: h.quantile(0.99), Max: h.max, WorstWait: h.max}, nil
}

// memory reports the Go heap bytes per handle: k handles on distinct
// names (per lock) or on one name (per handle).
func memory(ctx context.Context, open func(ctx context.Context, key string) (mutexH, error), k int, distinct bool, tag string) (sample, error) {
	before := settledHeap()
	hs := make([]mutexH, 0, k)
	defer func() {
		for _, h := range hs {
			_ = h.close()
		}
	}()
	for i := range k {
		key := "mem-one"
		if distinct {
			key = fmt.Sprintf("mem-%s-%d", tag, i)
		}
		h, err := open(ctx, key)
		if err != nil {
			return sample{}, err
		}
		hs = append(hs, h)
	}
	after := settledHeap()
	runtime.KeepAlive(hs)
	return sample{Ops: int64(k), Bytes: (after - before) / int64(k)}, nil
}

// settledHeap returns the live Go heap once it has stopped moving: what
// the previous subject closed (sessions revoked, streams torn down) is
// freed by its clients' goroutines a little after Close returns, and would
// otherwise be subtracted from the next subject's handles.
func settledHeap() int64 {
	var m runtime.MemStats
	prev := int64(-1)
	for range 25 {
		runtime.GC()
		runtime.ReadMemStats(&m)
		cur := int64(m.HeapAlloc)
		if prev >= 0 && cur-prev < 2048 && prev-cur < 2048 {
			return cur
		}
		prev = cur
		time.Sleep(20 * time.Millisecond)
	}
	return int64(m.HeapAlloc)
}
