//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/redislock"
)

// Redis queue tables: baton's Queue on Redis beside a floor of raw stream
// commands (one job: XADD, XREADGROUP, XACK; the three round trips of a
// Put, a Claim and an Ack) and beside asynq, whose workers do the same
// no-op jobs.

// rawStreamQueue is the floor: a stream with one consumer group.
type rawStreamQueue struct {
	c      *redis.Client
	stream string
	id     string // the entry claimed
}

func newRawStreamQueue(ctx context.Context, c *redis.Client, stream string) (*rawStreamQueue, error) {
	err := c.XGroupCreateMkStream(ctx, stream, "g", "$").Err()
	if err != nil && !isBusyGroup(err) {
		return nil, err
	}
	return &rawStreamQueue{c: c, stream: stream}, nil
}

func isBusyGroup(err error) bool { return strings.HasPrefix(err.Error(), "BUSYGROUP") }

// take adds an entry and claims it, blocking as a Claim does; the stream
// is trimmed to about 10,000 entries by the XADD, so that memory stays
// flat, as baton's Ack deletes the job.
func (r *rawStreamQueue) take(ctx context.Context, payload []byte) error {
	if err := r.c.XAdd(ctx, &redis.XAddArgs{Stream: r.stream, MaxLen: 10_000, Approx: true, Values: []any{"p", payload}}).Err(); err != nil {
		return err
	}
	ss, err := r.c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{r.stream, ">"}, Count: 1, Block: 0}).Result()
	if err != nil {
		return err
	}
	if len(ss) != 1 || len(ss[0].Messages) != 1 {
		return fmt.Errorf("XREADGROUP replied %v", ss)
	}
	r.id = ss[0].Messages[0].ID
	return nil
}

func (r *rawStreamQueue) ack(ctx context.Context) error {
	return r.c.XAck(ctx, r.stream, "g", r.id).Err()
}

// redisQueueEnv is what the Redis queue tables share: a baton Backend on
// a client of their own, opened at the first run and closed at the end.
type redisQueueEnv struct {
	addr string
	mu   sync.Mutex
	c    *redis.Client  // guarded by mu
	b    baton.Backend  // guarded by mu
	n    map[string]int // guarded by mu: jobs per run, by subject
}

func (e *redisQueueEnv) open() (*redis.Client, baton.Backend, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.b != nil {
		return e.c, e.b, nil
	}
	c := redis.NewClient(&redis.Options{Addr: e.addr, PoolSize: 64})
	b, err := redislock.New(c)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	e.c, e.b = c, b
	return c, b, nil
}

func (e *redisQueueEnv) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.b != nil {
		e.b.Close()
		e.c.Close()
		e.b, e.c = nil, nil
	}
}

// jobs returns how many jobs a run of subject prefills: about dur's worth
// at the rate its last run measured (a first run, thrown away for network
// tables, takes a few hundred).
func (e *redisQueueEnv) jobs(subject string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n, ok := e.n[subject]; ok {
		return n
	}
	return 300
}

func (e *redisQueueEnv) measured(subject string, rate float64, dur time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[subject] = min(max(int(rate*dur.Seconds()), 300), 1_000_000)
}

// drained is what a run of workers measured: the jobs done, from the first
// completion to the last (starting workers is not measured, on either
// side), and the done counts of each worker when known.
func drained(n int, first, last time.Time, per []int64, cpu time.Duration) sample {
	el := last.Sub(first)
	s := sample{Ops: int64(n), Seconds: el.Seconds(), Throughput: float64(n-1) / el.Seconds(), CPUPerOp: int64(cpu) / int64(n)}
	if len(per) > 0 {
		lo, hi := per[0], per[0]
		for _, v := range per {
			lo, hi = min(lo, v), max(hi, v)
		}
		if hi > 0 {
			s.Fairness = float64(lo) / float64(hi)
		}
	}
	return s
}

// batonWorkers prefills n jobs, then drains them with g workers, each a
// handle of its own doing Claim and Ack.
func batonWorkers(ctx context.Context, b baton.Backend, n, g int, extra func() time.Duration) (sample, error) {
	q, err := b.Queue(ctx, "bench-workers")
	if err != nil {
		return sample{}, err
	}
	defer q.Close()
	payload := make([]byte, queueJob)
	for left := n; left > 0; {
		k := min(left, baton.MaxBatch)
		specs := make([]baton.JobSpec, k)
		for i := range specs {
			specs[i] = baton.JobSpec{Payload: payload}
		}
		if _, err := q.PutBatch(ctx, specs); err != nil {
			return sample{}, err
		}
		left -= k
	}
	hs := make([]baton.Queue, g)
	for i := range hs {
		if hs[i], err = b.Queue(ctx, "bench-workers"); err != nil {
			return sample{}, err
		}
		defer hs[i].Close()
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done atomic.Int64
	var first, last time.Time
	var once sync.Once
	per := make([]int64, g)
	errs := make([]error, g)
	c0 := cpuNow(extra)
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Go(func() {
			for {
				j, err := h.Claim(wctx)
				if err != nil {
					if wctx.Err() == nil {
						errs[i] = err
						cancel()
					}
					return
				}
				if err := j.Ack(wctx); err != nil {
					errs[i] = err
					cancel()
					return
				}
				per[i]++
				once.Do(func() { first = time.Now() })
				if done.Add(1) == int64(n) {
					last = time.Now()
					cancel()
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return sample{}, err
	}
	return drained(n, first, last, per, cpuNow(extra)-c0), nil
}

// asynqWorkers prefills n no-op tasks and drains them with an asynq
// server of g workers.
func asynqWorkers(ctx context.Context, c *redis.Client, n, g int, extra func() time.Duration) (sample, error) {
	cl := asynq.NewClientFromRedisClient(c)
	payload := make([]byte, queueJob)
	var next atomic.Int64
	errs := make([]error, 16)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := cl.EnqueueContext(ctx, asynq.NewTask("noop", payload)); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return sample{}, err
	}
	var done atomic.Int64
	var first, last time.Time
	var once sync.Once
	finished := make(chan struct{})
	srv := asynq.NewServerFromRedisClient(c, asynq.Config{
		Concurrency: g,
		Logger:      asynqQuiet{},
		LogLevel:    asynq.FatalLevel,
		// How long the server sleeps on an empty queue: the queue is
		// full until the run ends, so this only shortens the shutdown.
		TaskCheckInterval: 100 * time.Millisecond,
	})
	c0 := cpuNow(extra)
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		once.Do(func() { first = time.Now() })
		if done.Add(1) == int64(n) {
			last = time.Now()
			close(finished)
		}
		return nil
	})); err != nil {
		return sample{}, err
	}
	select {
	case <-finished:
	case <-ctx.Done():
		srv.Shutdown()
		return sample{}, ctx.Err()
	}
	cpu := cpuNow(extra) - c0
	// Shutdown waits for the workers, which mark their last tasks done
	// after the handler returned: the next run starts from an empty queue.
	srv.Shutdown()
	return drained(n, first, last, nil, cpu), nil
}

type asynqQuiet struct{}

func (asynqQuiet) Debug(...any) {}
func (asynqQuiet) Info(...any)  {}
func (asynqQuiet) Warn(...any)  {}
func (asynqQuiet) Error(...any) {}
func (asynqQuiet) Fatal(...any) {}

// queueRedisTables are the queue tables of the Redis section.
func queueRedisTables(cfg config, ce *clusterEnv, extra func() time.Duration) []*plannedTable {
	if len(ce.redis) == 0 {
		return nil
	}
	const sec = "Redis"
	const floor = "raw XADD + XREADGROUP + XACK"
	env := &redisQueueEnv{addr: ce.redis[0].addr}
	bq := &subject{name: "baton redis", id: "bredisq", baton: true, kind: "redis"}
	raw := &subject{name: floor, id: "rawstream", kind: "redis"}
	payload := make([]byte, queueJob)
	un := newPlanned("redis-queue-uncontended", sec, fmt.Sprintf("Redis queue, uncontended Put+Claim+Ack of a %d B job (one client)", queueJob), "throughput", "",
		[]string{floor}, []*subject{bq, raw},
		func(ctx context.Context, s *subject) (sample, error) {
			c, b, err := env.open()
			if err != nil {
				return sample{}, err
			}
			var o op
			if s == raw {
				r, err := newRawStreamQueue(ctx, c, "rawq:uncontended")
				if err != nil {
					return sample{}, err
				}
				o = op{func(ctx context.Context) error { return r.take(ctx, payload) }, r.ack, func() error { return nil }}
			} else {
				q, err := b.Queue(ctx, "bench-uncontended")
				if err != nil {
					return sample{}, err
				}
				var j *baton.Job
				o = op{func(ctx context.Context) error {
					if _, err := q.Put(ctx, payload); err != nil {
						return err
					}
					j, err = q.Claim(ctx)
					return err
				}, func(ctx context.Context) error { return j.Ack(ctx) }, q.Close}
			}
			defer o.close()
			if err := warmUp(ctx, []op{o}); err != nil {
				return sample{}, err
			}
			return uncontended(ctx, o, cfg.dur, extra)
		})
	un.done = env.close
	g := cfg.gs[len(cfg.gs)-1]
	as := &subject{name: "asynq", id: "asynq", kind: "redis"}
	w := newPlanned(fmt.Sprintf("redis-queue-w%d", g), sec,
		fmt.Sprintf("Redis queue, %d workers draining prefilled no-op %d B jobs: jobs done per second, first to last", g, queueJob), "throughput", "",
		[]string{"asynq"}, []*subject{bq, as},
		func(ctx context.Context, s *subject) (sample, error) {
			c, b, err := env.open()
			if err != nil {
				return sample{}, err
			}
			n := env.jobs(s.name)
			var smp sample
			if s == as {
				smp, err = asynqWorkers(ctx, c, n, g, extra)
			} else {
				smp, err = batonWorkers(ctx, b, n, g, extra)
			}
			if err == nil {
				env.measured(s.name, smp.Throughput, cfg.dur)
			}
			return smp, err
		})
	w.done = env.close
	return []*plannedTable{un, w}
}
