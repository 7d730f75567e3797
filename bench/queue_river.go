//go:build linux

package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River, the PostgreSQL job queue, as the peer of the PostgreSQL workers'
// table: its client runs the n workers (MaxWorkers) on a pool as large as
// pglock's, with its fetches as frequent as it allows (FetchCooldown and
// FetchPollInterval at their 1 ms minimum), and a feeder inserts jobs in
// batches with InsertMany as baton's rows' feeder does with PutBatch.
// Jobs it completes stay in its table, as River keeps them.

const riverName = "River"

// dbqRiverArgs is River's no-op job.
type dbqRiverArgs struct{}

func (dbqRiverArgs) Kind() string { return "baton_bench_noop" }

// dbqRiverWorker does nothing but count the jobs it ran.
type dbqRiverWorker struct {
	river.WorkerDefaults[dbqRiverArgs]
	mu   sync.Mutex
	done func()
}

func (w *dbqRiverWorker) Work(context.Context, *river.Job[dbqRiverArgs]) error {
	w.mu.Lock()
	done := w.done
	w.mu.Unlock()
	if done != nil {
		done()
	}
	return nil
}

func (de *dbEnv) riverSubject(ctx context.Context, url string) (*dbqSubject, error) {
	pool, err := pgxpool.New(ctx, url+"&pool_max_conns=64")
	if err != nil {
		return nil, err
	}
	de.closers = append(de.closers, func() error { pool.Close(); return nil })
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, err
	}
	s := &subject{name: riverName, id: "river", kind: "postgres"}
	return &dbqSubject{s: s,
		open: func(context.Context, string) (dbqClient, error) {
			return nil, errors.New("river: only the workers' table")
		},
		workers: func(ctx context.Context, name string, n int, dur time.Duration, extra func() time.Duration) (sample, error) {
			return riverWorkers(ctx, pool, "river_"+name, n, dur, extra)
		}}, nil
}

// riverWorkers runs one River client of n workers for a window; River's
// workers are its own, so neither their latency nor their fairness is
// measured, only the jobs they ran.
func riverWorkers(ctx context.Context, pool *pgxpool.Pool, queue string, n int, dur time.Duration, extra func() time.Duration) (sample, error) {
	w := &dbqRiverWorker{}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{queue: {MaxWorkers: n}},
		Workers:           workers,
		FetchCooldown:     river.FetchCooldownMin,
		FetchPollInterval: river.FetchPollIntervalMin,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return sample{}, err
	}
	params := make([]river.InsertManyParams, dbqBatch)
	for i := range params {
		params[i] = river.InsertManyParams{Args: dbqRiverArgs{}, InsertOpts: &river.InsertOpts{Queue: queue}}
	}
	f := newFeeder(func(ctx context.Context, k int) error {
		_, err := c.InsertMany(ctx, params[:k])
		return err
	})
	if err := f.fill(ctx); err != nil {
		return sample{}, err
	}
	// The window starts a quarter of a run after River's first job ran
	// (its client takes a while to start fetching); the first job after
	// the window counts, and ends it.
	var (
		wmu     sync.Mutex
		win     *dbqWindow
		ran     int64
		elapsed time.Duration
	)
	started := make(chan dbqWindow, 1)
	passed := make(chan struct{})
	w.mu.Lock()
	w.done = func() {
		t := time.Now()
		f.finished()
		wmu.Lock()
		defer wmu.Unlock()
		switch {
		case win == nil:
			nw := newWindow(t, dur)
			win = &nw
			started <- nw
		case elapsed > 0 || t.Before(win.from):
		default:
			ran++
			if !t.Before(win.to) {
				elapsed = t.Sub(win.from)
				close(passed)
			}
		}
	}
	w.mu.Unlock()
	if err := c.Start(ctx); err != nil {
		return sample{}, err
	}
	var cpu func() time.Duration
	var werr error
	select {
	case nw := <-started:
		cpu = nw.cpuOver(extra)
	case <-time.After(10*time.Second + dur):
		werr = errors.New("river: no job ran")
	}
	fctx, stopFeed := context.WithCancel(ctx)
	var ferr error
	var fwg sync.WaitGroup
	fwg.Go(func() { ferr = f.run(fctx) })
	if werr == nil {
		select {
		case <-passed:
		case <-time.After(2*dur + 10*time.Second):
			werr = errors.New("river: no job ran after the window")
		}
	}
	stopFeed()
	fwg.Wait()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	serr := c.Stop(sctx)
	if err := errors.Join(werr, ferr, serr); err != nil {
		return sample{}, err
	}
	used := cpu()
	wmu.Lock()
	ops, sec := ran, elapsed.Seconds()
	wmu.Unlock()
	return sample{Ops: ops, Seconds: sec, Throughput: float64(ops) / sec, CPUPerOp: int64(used) / max(ops, 1)}, nil
}
