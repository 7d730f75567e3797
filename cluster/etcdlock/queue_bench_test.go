package etcdlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/queuecheck"
)

// BenchmarkQueueUncontended: one goroutine putting, claiming (TryClaim)
// and acking one job at a time on a single-member server.
func BenchmarkQueueUncontended(b *testing.B) {
	benchQueue(b, newBenchEnv(b).be)
}

func benchQueue(b *testing.B, be baton.Backend) {
	ctx := context.Background()
	q, err := be.Queue(ctx, "bench-queue")
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	payload := []byte("job")
	for b.Loop() {
		if _, err := q.Put(ctx, payload); err != nil {
			b.Fatal(err)
		}
		j, err := q.TryClaim(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Ack(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueuePaired: baton's Put+TryClaim+Ack and a raw floor of the
// same job (a Put; a Get of the oldest key with its value; a Txn deleting
// it if unchanged) interleaved op by op, so that both see the same load;
// baton's Put, Claim and Ack are timed apart too (p50 each).
func BenchmarkQueuePaired(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	q, err := e.be.Queue(ctx, "bench-paired")
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	c := e.cl
	payload := []byte("job")
	prefix := "/bench-floor/" + e.name() + "/"
	var tb, tf, pp, pc, pa []time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		if _, err := q.Put(ctx, payload); err != nil {
			b.Fatal(err)
		}
		ta := time.Now()
		j, err := q.TryClaim(ctx)
		if err != nil {
			b.Fatal(err)
		}
		tc := time.Now()
		if err := j.Ack(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		pp, pc, pa = append(pp, ta.Sub(t0)), append(pc, tc.Sub(ta)), append(pa, t1.Sub(tc))
		n++
		if _, err := c.Put(ctx, fmt.Sprintf("%s%016x", prefix, n), string(payload)); err != nil {
			b.Fatal(err)
		}
		r, err := c.Get(ctx, prefix, clientv3.WithFirstCreate()...)
		if err != nil || len(r.Kvs) == 0 {
			b.Fatal(err, "no job")
		}
		kv := r.Kvs[0]
		t, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).Commit()
		if err != nil || !t.Succeeded {
			b.Fatal(err, "not deleted")
		}
		tb, tf = append(tb, t1.Sub(t0)), append(tf, time.Since(t1))
	}
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	pb, pf := p50(tb), p50(tf)
	b.ReportMetric(float64(pb.Microseconds())/1000, "baton-p50-ms")
	b.ReportMetric(float64(pf.Microseconds())/1000, "floor-p50-ms")
	b.ReportMetric(float64(pb)/float64(pf), "ratio")
	b.ReportMetric(float64(p50(pp).Microseconds())/1000, "put-ms")
	b.ReportMetric(float64(p50(pc).Microseconds())/1000, "claim-ms")
	b.ReportMetric(float64(p50(pa).Microseconds())/1000, "ack-ms")
}

// BenchmarkQueuePutProducers: producers Put loops at once, each on a
// handle of its own, on one queue; b.N Puts in all. Reports the p50 and
// p90 of one Put's latency.
func BenchmarkQueuePutProducers(b *testing.B) {
	const producers = 8
	e := newBenchEnv(b)
	ctx := context.Background()
	qs := make([]baton.Queue, producers)
	for i := range qs {
		q, err := e.be.Queue(ctx, "bench-producers")
		if err != nil {
			b.Fatal(err)
		}
		defer q.Close()
		qs[i] = q
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	lat := make([][]time.Duration, producers)
	var wg sync.WaitGroup
	b.ResetTimer()
	for i, q := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				if _, err := q.Put(ctx, []byte("job")); err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "put-p50-ms")
		b.ReportMetric(float64(all[len(all)*9/10].Microseconds())/1000, "put-p90-ms")
	}
}

// BenchmarkQueueWorkers16: 16 handles of one Backend claiming and acking
// jobs put before the timer starts; jobs/s and fairness (the fewest jobs
// one worker did over the most).
func BenchmarkQueueWorkers16(b *testing.B) {
	const g = 16
	ctx := context.Background()
	be := newBenchEnv(b).be
	q, err := be.Queue(ctx, "workers")
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	specs := make([]baton.JobSpec, 100)
	for i := range specs {
		specs[i] = baton.JobSpec{Payload: []byte("job")}
	}
	for left := b.N; left > 0; left -= len(specs) {
		if _, err := q.PutBatch(ctx, specs[:min(left, len(specs))]); err != nil {
			b.Fatal(err)
		}
	}
	hs := make([]baton.Queue, g)
	for i := range hs {
		if hs[i], err = be.Queue(ctx, "workers"); err != nil {
			b.Fatal(err)
		}
		defer hs[i].Close()
	}
	queuecheck.Drain(b, hs, b.N)
}

// BenchmarkQueueBacklog: TryClaim+Ack of one job at the head of a backlog
// of jobs put before the timer starts, on a server compacted after the
// puts.
func BenchmarkQueueBacklog(b *testing.B) {
	for _, backlog := range []int{500, 50000} {
		b.Run(fmt.Sprint(backlog), func(b *testing.B) {
			ctx := context.Background()
			e := newBenchEnv(b)
			q, err := e.be.Queue(ctx, "backlog")
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			queuecheck.PutJobs(b, q, backlog+b.N)
			r, err := e.cl.Get(ctx, "compact")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.cl.Compact(ctx, r.Header.Revision); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			queuecheck.ClaimAck(b, q, b.N)
		})
	}
}

// BenchmarkQueueEnded: TryClaim+Ack of one job at the head of a backlog
// of 500 after `ended` jobs were claimed and acked since the server's last
// compaction. Until a compaction, etcd's index keeps a deleted key beside
// the live ones, and a range read walks it; the jobs' records and claim
// keys are deleted here in two requests rather than by that many acks,
// which leaves the same keys behind; the backlog is put more than
// floorSlack after them, as jobs done over a while would be.
func BenchmarkQueueEnded(b *testing.B) {
	for _, ended := range []int{0, 10000, 50000} {
		b.Run(fmt.Sprint(ended), func(b *testing.B) {
			ctx := context.Background()
			e := newBenchEnv(b)
			q, err := e.be.Queue(ctx, "ended")
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			if ended > 0 {
				ids := queuecheck.PutJobs(b, q, ended)
				dir := queueDir(b, e.cl, "/ended/")
				for i := 0; i < len(ids); i += 1000 {
					var ops []clientv3.Op
					for _, id := range ids[i:min(i+1000, len(ids))] {
						ops = append(ops, clientv3.OpPut(fmt.Sprintf("%sc/%016x", dir, uint64(id)), ""))
					}
					if _, err := e.cl.Txn(ctx).Then(ops...).Commit(); err != nil {
						b.Fatal(err)
					}
				}
				for _, f := range []string{"j/", "c/"} {
					if _, err := e.cl.Delete(ctx, dir+f, clientv3.WithPrefix()); err != nil {
						b.Fatal(err)
					}
				}
				time.Sleep(time.Duration(floorSlack) + 100*time.Millisecond)
			}
			queuecheck.PutJobs(b, q, 500+b.N)
			b.ResetTimer()
			queuecheck.ClaimAck(b, q, b.N)
		})
	}
}

// queueDir returns the directory of the queue whose keys contain part.
func queueDir(b *testing.B, cl *clientv3.Client, part string) string {
	r, err := cl.Get(context.Background(), "\x00", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	if err != nil {
		b.Fatal(err)
	}
	for _, kv := range r.Kvs {
		if k := string(kv.Key); strings.Contains(k, part) {
			return k[:strings.Index(k, part)+len(part)]
		}
	}
	b.Fatalf("no key of %q", part)
	return ""
}
