package redislock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton"
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
	ttl := (10 * time.Second).Milliseconds()
	names := []string{"floor", "scripts", "baton"}
	p50 := alternate(b, names,
		func() { r.cycle(b, ctx) },
		func() {
			if err := scriptJobsPut.Run(ctx, c, keys, "", benchJobPayload, "", 0, 1).Err(); err != nil {
				b.Fatal(err)
			}
			v, err := scriptJobsClaim.Run(ctx, c, keys, 1, ttl, 0).Slice()
			if err != nil || len(v) != 6 {
				b.Fatal(v, err)
			}
			if n, err := scriptJobsAck.Run(ctx, c, keys, v[1], v[5]).Int64(); n != 1 || err != nil {
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
