package redislock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/queuecheck"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

var benchJobPayload = []byte("payload of a job")

// BenchmarkQueuePutClaimAck: one Put, TryClaim and Ack per op on one
// handle, uncontended.
func BenchmarkQueuePutClaimAck(b *testing.B) {
	s := startRedis(b)
	q, err := benchBackend(b, s.URL("")).Queue(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	for b.Loop() {
		putClaimAck(b, ctx, q)
	}
}

func putClaimAck(b *testing.B, ctx context.Context, q baton.Queue) {
	if _, err := q.Put(ctx, benchJobPayload); err != nil {
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

// rawStream is the floor of a queue: XADD, XREADGROUP and XACK on a
// stream with one consumer group, the three round trips of a Put, a Claim
// and an Ack (as the bench program's floor does).
type rawStream struct {
	c      *redis.Client
	stream string
}

func newRawStream(b *testing.B, c *redis.Client, stream string) *rawStream {
	if err := c.XGroupCreateMkStream(context.Background(), stream, "g", "$").Err(); err != nil {
		b.Fatal(err)
	}
	return &rawStream{c: c, stream: stream}
}

func (r *rawStream) cycle(b *testing.B, ctx context.Context) {
	err := r.c.XAdd(ctx, &redis.XAddArgs{Stream: r.stream, MaxLen: 10_000, Approx: true, Values: []any{"p", benchJobPayload}}).Err()
	if err != nil {
		b.Fatal(err)
	}
	ss, err := r.c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{r.stream, ">"}, Count: 1, Block: 0}).Result()
	if err != nil || len(ss) != 1 || len(ss[0].Messages) != 1 {
		b.Fatal(fmt.Errorf("XREADGROUP replied %v, %v", ss, err))
	}
	if err := r.c.XAck(ctx, r.stream, "g", ss[0].Messages[0].ID).Err(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkQueueRawFloor: the floor alone, one XADD, XREADGROUP and XACK
// per op.
func BenchmarkQueueRawFloor(b *testing.B) {
	s := startRedis(b)
	r := newRawStream(b, s.Client(), "rawq")
	ctx := context.Background()
	for b.Loop() {
		r.cycle(b, ctx)
	}
}

// BenchmarkQueueVsFloor alternates blocks of floor cycles and of
// Put+TryClaim+Ack on the same server, so that both meet the same load on
// a shared machine, and reports both medians and their ratio.
func BenchmarkQueueVsFloor(b *testing.B) {
	s := startRedis(b)
	ctx := context.Background()
	r := newRawStream(b, s.Client(), "rawq")
	q, err := benchBackend(b, s.URL("")).Queue(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	p50 := alternate(b, []string{"floor", "baton"},
		func() { r.cycle(b, ctx) },
		func() { putClaimAck(b, ctx, q) })
	if p50 != nil {
		b.ReportMetric(float64(p50[1])/float64(p50[0]), "x-floor")
	}
}

// BenchmarkQueueParts splits an uncontended Put+TryClaim+Ack into its
// layers, alternated on one server so that all meet the same load:
//
//	floor    XADD, XREADGROUP and XACK
//	scripts  jobs_put, jobs_claim and jobs_ack by EVALSHA, nothing else
//	baton    Queue.Put, TryClaim and Job.Ack: the driver and the core
//
// Each reports its median as "NAME-p50-µs", and its ratio to the floor.
func BenchmarkQueueParts(b *testing.B) {
	s := startRedis(b)
	c := s.Client()
	ctx := context.Background()
	r := newRawStream(b, c, "rawq")
	q, err := benchBackend(b, s.URL("")).Queue(ctx, "parts-baton")
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	keys := nameKeys(redisnode.KeyBase(DefaultPrefix, kjobs, "parts-scripts"), jobsSuffixes)
	putKeys := nameKeys(redisnode.KeyBase(DefaultPrefix, kjobs, "parts-scripts"), jobsPutKeys)
	ttl := (10 * time.Second).Milliseconds()
	names := []string{"floor", "scripts", "baton"}
	p50 := alternate(b, names,
		func() { r.cycle(b, ctx) },
		func() {
			if err := scriptJobsPut.Run(ctx, c, putKeys, "", benchJobPayload, "", 0, 1).Err(); err != nil {
				b.Fatal(err)
			}
			v, err := scriptJobsClaim.Run(ctx, c, keys[:jobsKeysClaim], 1, ttl, 0).Slice()
			if err != nil || len(v) != 5 {
				b.Fatal(v, err)
			}
			if n, err := scriptJobsAck.Run(ctx, c, keys[:jobsKeysAck], v[1], v[4]).Int64(); n != 1 || err != nil {
				b.Fatal(n, err)
			}
		},
		func() { putClaimAck(b, ctx, q) })
	for i, p := range p50 {
		if i > 0 {
			b.ReportMetric(float64(p)/float64(p50[0]), names[i]+"-x-floor")
		}
	}
}

// BenchmarkQueueWorkers16: 16 handles drain b.N prefilled jobs, each
// doing Claim and Ack, as the bench program's redis-queue-w16 table does.
// It reports jobs per second, the fairness of claims (fewest over most
// done by one handle), and from INFO commandstats the server's µs per job
// in scripts and the commands they ran per job.
func BenchmarkQueueWorkers16(b *testing.B) {
	const g = 16
	s := startRedis(b)
	c := s.Client()
	ctx := context.Background()
	bk := benchBackend(b, s.URL(""))
	q, err := bk.Queue(ctx, "workers")
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	specs := make([]baton.JobSpec, baton.MaxBatch)
	for i := range specs {
		specs[i] = baton.JobSpec{Payload: benchJobPayload}
	}
	for left := b.N; left > 0; left -= len(specs) {
		if _, err := q.PutBatch(ctx, specs[:min(left, len(specs))]); err != nil {
			b.Fatal(err)
		}
	}
	hs := make([]baton.Queue, g)
	for i := range hs {
		if hs[i], err = bk.Queue(ctx, "workers"); err != nil {
			b.Fatal(err)
		}
		defer hs[i].Close()
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu := serverCPU(b, c)
	queuecheck.Drain(b, hs, b.N)
	cpu()
	st := commandStats(b, c)
	inner, usec := 0, 0.0
	for k, v := range st {
		switch k {
		case "evalsha":
			usec += v.usec
		case "config|resetstat", "info":
		default:
			inner += v.calls
		}
	}
	if testing.Verbose() {
		for k, v := range st {
			b.Logf("%-20s %8d calls %8.2f µs/job %6.2f µs/call", k, v.calls, v.usec/float64(b.N), v.usec/float64(max(v.calls, 1)))
		}
	}
	b.ReportMetric(usec/float64(b.N), "server-µs/job")
	b.ReportMetric(float64(inner)/float64(b.N), "calls/job")
}

type cmdStat struct {
	calls int
	usec  float64
}

// commandStats reads INFO commandstats: calls and µs per command.
func commandStats(b *testing.B, c *redis.Client) map[string]cmdStat {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]cmdStat{}
	for _, l := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":")
		if !ok || name == l {
			continue
		}
		var st cmdStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.Atoi(v)
			case "usec":
				st.usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		out[name] = st
	}
	return out
}

// BenchmarkQueueScripts runs the scripts of a job's life apart, b.N of
// each in turn (puts, claims, acks, by EVALSHA alone), and reports the
// server's µs per call of each (INFO commandstats) and the commands each
// ran.
func BenchmarkQueueScripts(b *testing.B) {
	s := startRedis(b)
	c := s.Client()
	ctx := context.Background()
	keys := nameKeys(redisnode.KeyBase(DefaultPrefix, kjobs, "scripts"), jobsSuffixes)
	putKeys := nameKeys(redisnode.KeyBase(DefaultPrefix, kjobs, "scripts"), jobsPutKeys)
	ttl := (10 * time.Second).Milliseconds()
	type claimed struct{ id, tok any }
	cs := make([]claimed, b.N)
	phase := func(name string, f func(i int)) {
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		for i := range b.N {
			f(i)
		}
		inner, usec := 0, 0.0
		for k, v := range commandStats(b, c) {
			switch k {
			case "evalsha":
				usec = v.usec
			case "config|resetstat", "info", "script|load":
			default:
				inner += v.calls
			}
		}
		b.ReportMetric(usec/float64(b.N), name+"-µs")
		b.ReportMetric(float64(inner)/float64(b.N), name+"-calls")
	}
	phase("put", func(int) {
		if err := scriptJobsPut.Run(ctx, c, putKeys, "", benchJobPayload, "", 0, 1).Err(); err != nil {
			b.Fatal(err)
		}
	})
	phase("claim", func(i int) {
		v, err := scriptJobsClaim.Run(ctx, c, keys[:jobsKeysClaim], 1, ttl, 0).Slice()
		if err != nil || len(v) != 5 {
			b.Fatal(v, err)
		}
		cs[i] = claimed{v[1], v[4]}
	})
	phase("ack", func(i int) {
		if n, err := scriptJobsAck.Run(ctx, c, keys[:jobsKeysAck], cs[i].id, cs[i].tok).Int64(); n != 1 || err != nil {
			b.Fatal(n, err)
		}
	})
}
