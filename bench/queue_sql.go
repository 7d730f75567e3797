//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton"
)

// Queue tables of the PostgreSQL, MariaDB, etcd and ZooKeeper sections:
// baton's Queue on each server beside a raw floor on the same server (the
// least a program does to put, claim and delete a job there, with no
// lease, token or wake-up), and on PostgreSQL beside River. Every job is
// a no-op: the figure is the queue's own cost.

// dbqClient is one client of a work queue.
type dbqClient interface {
	// put adds n jobs (n > 1: in one batch).
	put(ctx context.Context, n int) error
	// claimAck claims the oldest ready job, waiting for one, and acks
	// (deletes) it.
	claimAck(ctx context.Context) error
	close() error
}

// dbqSubject is one row of the queue tables.
type dbqSubject struct {
	s *subject
	// open returns a new client of the queue named name.
	open func(ctx context.Context, name string) (dbqClient, error)
	// workers, when set, runs n workers its own way (River runs its
	// own); nil: n clients from open, each claiming in a loop.
	workers func(ctx context.Context, name string, n int, dur time.Duration, extra func() time.Duration) (sample, error)
}

// dbqFailing is a row whose every open fails with err (its server did
// not start), so that the tables report why.
func dbqFailing(name, id, kind string, isBaton bool, err error) *dbqSubject {
	return &dbqSubject{s: &subject{name: name, id: id, kind: kind, baton: isBaton},
		open: func(context.Context, string) (dbqClient, error) { return nil, err }}
}

// dbqBaton is a client of a baton Queue: Put (PutBatch for n > 1), then
// Claim, which waits, and Ack.
type dbqBaton struct {
	q     baton.Queue
	specs []baton.JobSpec
}

var dbqPayload = []byte("no-op job")

func (b *dbqBaton) put(ctx context.Context, n int) error {
	if n == 1 {
		_, err := b.q.Put(ctx, dbqPayload)
		return err
	}
	for len(b.specs) < n {
		b.specs = append(b.specs, baton.JobSpec{Payload: dbqPayload})
	}
	_, err := b.q.PutBatch(ctx, b.specs[:n])
	return err
}

func (b *dbqBaton) claimAck(ctx context.Context) error {
	j, err := b.q.Claim(ctx)
	if err != nil {
		return err
	}
	return j.Ack(ctx)
}

func (b *dbqBaton) close() error { return b.q.Close() }

// dbqBatonSubject is the row of a baton Backend's queue; its clients are
// handles of that one Backend, as a pool of workers in one process has.
func dbqBatonSubject(name, id, kind string, b baton.Backend) *dbqSubject {
	return &dbqSubject{s: &subject{name: name, id: id, kind: kind, baton: true},
		open: func(ctx context.Context, queue string) (dbqClient, error) {
			q, err := b.Queue(ctx, id+"-"+queue)
			if err != nil {
				return nil, err
			}
			return &dbqBaton{q: q}, nil
		}}
}

// dbqUncontended measures Put+Claim+Ack of one job at a time by one
// client, with nobody else on the queue.
func dbqUncontended(ctx context.Context, d *dbqSubject, name string, dur time.Duration, extra func() time.Duration) (sample, error) {
	c, err := d.open(ctx, name)
	if err != nil {
		return sample{}, err
	}
	o := op{take: func(ctx context.Context) error { return c.put(ctx, 1) }, give: c.claimAck, close: c.close}
	defer c.close()
	if err := warmUp(ctx, []op{o}); err != nil {
		return sample{}, err
	}
	return uncontended(ctx, o, dur, extra)
}

// Workers' runs keep a backlog of about dbqBacklog jobs, put in batches
// of dbqBatch by a feeder, so that workers never wait for work; the
// window measured starts a quarter of a run after the workers do. Each
// run has a queue of its own, so that the jobs a run leaves do not grow
// the next one's backlog.
const (
	dbqBacklog = 256
	dbqBatch   = 32
)

var dbqRuns atomic.Int64

// dbqFeeder keeps the backlog of a workers' run: it puts a batch whenever
// fewer than dbqBacklog jobs put are not yet done.
type dbqFeeder struct {
	put  func(ctx context.Context, n int) error
	sent atomic.Int64
	done atomic.Int64
	poke chan struct{}
}

func newFeeder(put func(ctx context.Context, n int) error) *dbqFeeder {
	return &dbqFeeder{put: put, poke: make(chan struct{}, 1)}
}

// fill puts batches until the backlog is full.
func (f *dbqFeeder) fill(ctx context.Context) error {
	for f.sent.Load()-f.done.Load() < dbqBacklog {
		if err := f.put(ctx, dbqBatch); err != nil {
			return err
		}
		f.sent.Add(dbqBatch)
	}
	return nil
}

// finished counts a job done and wakes the feeder.
func (f *dbqFeeder) finished() {
	f.done.Add(1)
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// run fills the backlog each time a job is done, until ctx ends.
func (f *dbqFeeder) run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.poke:
		}
		if f.sent.Load()-f.done.Load() > dbqBacklog-dbqBatch {
			continue
		}
		// A put under way finishes: cancelled, a client logs its retry.
		if err := f.fill(context.WithoutCancel(ctx)); err != nil {
			return err
		}
	}
}

// dbqWindow is the measured window of a workers' run.
type dbqWindow struct{ from, to time.Time }

func newWindow(start time.Time, dur time.Duration) dbqWindow {
	from := start.Add(dur / 4)
	return dbqWindow{from: from, to: from.Add(dur)}
}

func (w dbqWindow) has(t time.Time) bool { return !t.Before(w.from) && t.Before(w.to) }

// cpuOver measures the CPU used over w (this process and extra), in the
// background; the result is ready once the window has passed.
func (w dbqWindow) cpuOver(extra func() time.Duration) func() time.Duration {
	var c0, c1 time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(time.Until(w.from))
		c0 = cpuNow(extra)
		time.Sleep(time.Until(w.to))
		c1 = cpuNow(extra)
	})
	return func() time.Duration { wg.Wait(); return c1 - c0 }
}

// dbqWorkers runs n clients, each claiming and acking jobs in a loop, for
// the window: throughput, Claim+Ack latency, and fairness (the fewest
// jobs one worker did over the most).
func dbqWorkers(ctx context.Context, d *dbqSubject, name string, n int, dur time.Duration, extra func() time.Duration) (sample, error) {
	name = fmt.Sprintf("%s-%d", name, dbqRuns.Add(1))
	if d.workers != nil {
		return d.workers(ctx, name, n, dur, extra)
	}
	feed, err := d.open(ctx, name)
	if err != nil {
		return sample{}, err
	}
	defer feed.close()
	cs := make([]dbqClient, 0, n)
	defer func() {
		for _, c := range cs {
			_ = c.close()
		}
	}()
	for range n {
		c, err := d.open(ctx, name)
		if err != nil {
			return sample{}, err
		}
		cs = append(cs, c)
	}
	f := newFeeder(feed.put)
	if err := f.fill(ctx); err != nil {
		return sample{}, err
	}
	w := newWindow(time.Now(), dur)
	cpu := w.cpuOver(extra)
	// Workers still claiming when the window has passed long ago are
	// stopped (a cancelled Claim claims nothing).
	wctx, cancel := context.WithDeadline(ctx, w.to.Add(10*time.Second))
	defer cancel()
	fctx, stopFeed := context.WithCancel(wctx)
	var ferr error
	var fwg sync.WaitGroup
	fwg.Go(func() { ferr = f.run(fctx) })
	// A job started in the window and finished after it counts, and the
	// window of its worker ends with it, so that a slow queue still
	// reports the jobs it got through.
	res := make([]*loopResult, n)
	var wg sync.WaitGroup
	for i, c := range cs {
		r := &loopResult{}
		res[i] = r
		wg.Go(func() {
			for {
				a := time.Now()
				if err := c.claimAck(wctx); err != nil {
					r.err = err
					return
				}
				b := time.Now()
				f.finished()
				if !a.Before(w.from) || w.has(b) {
					r.untimed++
					r.cycle.add(b.Sub(a))
				}
				if !b.Before(w.to) {
					r.untSec = b.Sub(w.from).Seconds()
					return
				}
			}
		})
	}
	wg.Wait()
	stopFeed()
	fwg.Wait()
	used := cpu()
	var errs []error
	for _, r := range res {
		errs = append(errs, r.err)
		r.ops = r.untimed
	}
	if err := errors.Join(append(errs, ferr)...); err != nil {
		return sample{}, err
	}
	s, err := mergeResults(res, dur, used)
	s.WorstWait = 0 // only the Claim+Ack cycle is timed
	return s, err
}

// dbqTables lists the queue tables of one section: uncontended beside
// the floor (subs[0]), and n workers beside every other row.
func dbqTables(cfg config, prefix, sec, what, floorDesc string, subs []*dbqSubject, workerRows []*dbqSubject, extra func() time.Duration) []*plannedTable {
	g := cfg.gs[len(cfg.gs)-1]
	byID := map[string]*dbqSubject{}
	var us, ws []*subject
	for _, d := range subs {
		byID[d.s.id] = d
		us = append(us, d.s)
	}
	for _, d := range workerRows {
		byID[d.s.id] = d
		ws = append(ws, d.s)
	}
	var mu sync.Mutex
	last := map[string]float64{} // guarded by mu; by subject id
	var refs []string
	for _, d := range workerRows {
		if !d.s.baton {
			refs = append(refs, d.s.name)
		}
	}
	return networked(
		newPlanned(prefix+"queue-uncontended", sec, fmt.Sprintf("%s queue, uncontended Put+Claim+Ack of a no-op job (floor: %s)", what, floorDesc), "throughput", "",
			[]string{subs[0].s.name}, us, func(ctx context.Context, s *subject) (sample, error) {
				return dbqUncontended(ctx, byID[s.id], "uncontended", cfg.dur, extra)
			}).twin(subs[0].s.name),
		newPlanned(fmt.Sprintf("%squeue-w%d", prefix, g), sec, fmt.Sprintf("%s queue, %d workers claiming and acking no-op jobs (a feeder keeps a backlog; a run lasts until each worker can do %d)", what, g, dbqFairJobs), "throughput", "",
			refs, ws, func(ctx context.Context, s *subject) (sample, error) {
				mu.Lock()
				dur := workersWindow(cfg.dur, g, last[s.id])
				mu.Unlock()
				smp, err := dbqWorkers(ctx, byID[s.id], fmt.Sprintf("w%d", g), g, dur, extra)
				if err == nil {
					mu.Lock()
					last[s.id] = smp.Throughput
					mu.Unlock()
				}
				return smp, err
			}),
	)
}

// dbqFairJobs is how many jobs each worker should do in a workers' run:
// fairness is the fewest jobs over the most, and a worker's count is off
// by a job or two by chance alone, which matters to a short count.
const dbqFairJobs = 100

// workersWindow is how long a run of n workers lasts: dur, or longer,
// up to 4×dur, so that at the throughput of the subject's last run
// (jobs/s; 0: none yet) each worker does dbqFairJobs jobs.
func workersWindow(dur time.Duration, n int, last float64) time.Duration {
	if last <= 0 {
		return dur
	}
	need := time.Duration(float64(dbqFairJobs*n) / last * float64(time.Second))
	return min(max(dur, need), 4*dur)
}

// server returns the section's server, or why it did not start: the
// error every subject of the section fails with.
func (de *dbEnv) server(ctx context.Context, sec, what string) (*dbServer, error) {
	for _, s := range de.servers {
		if s.what == what {
			return s, nil
		}
	}
	for _, s := range de.subjects[sec] {
		if _, err := s.mutex(ctx, ""); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%s: the server did not start", what)
}

// planDBQueues lists the queue tables of the selected PostgreSQL,
// MariaDB, etcd and ZooKeeper sections; the Backends and clients it opens
// are closed with de.
func planDBQueues(ctx context.Context, cfg config, de *dbEnv, ce *clusterEnv, want map[string]bool) []*plannedTable {
	var ts []*plannedTable
	if want["postgres"] {
		subs, river := de.pgQueues(ctx)
		ts = append(ts, dbqTables(cfg, "pg-", "PostgreSQL", "PostgreSQL", pgFloorDesc+"; leased floor: "+pgLeasedDesc, subs, []*dbqSubject{subs[1], river, subs[0]}, de.cpu["postgres"])...)
	}
	if want["mysql"] {
		subs := de.mysqlQueues(ctx)
		ts = append(ts, dbqTables(cfg, "mysql-", "MySQL/MariaDB", "MariaDB", mysqlFloorDesc+"; leased floor: "+mysqlLeasedDesc, subs, []*dbqSubject{subs[1], subs[0]}, de.cpu["mysql"])...)
	}
	if want["etcd"] && ce != nil {
		subs := etcdQueues(ctx, de, ce)
		ts = append(ts, dbqTables(cfg, "etcd-", "etcd", "etcd", etcdFloorDesc+"; leased floor: "+etcdLeasedDesc, subs, subs[1:2], nil)...)
	}
	if want["zookeeper"] {
		subs := de.zkQueues(ctx)
		ts = append(ts, dbqTables(cfg, "zk-", "ZooKeeper", "ZooKeeper", zkFloorDesc+"; leased floor: "+zkLeasedDesc, subs, subs[1:2], de.cpu["zookeeper"])...)
	}
	return ts
}
