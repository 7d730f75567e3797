package etcdlock

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/queuecheck"
)

// Modes of the reply-losing interceptor of testQueueUnsureEnds.
const (
	replyKept        = iota
	replyLostApplied // the request reaches the server, its answer does not reach the client
	replyLostBefore  // the request fails before it is sent
)

// testQueueUnsureEnds: an end of a claim whose request fails may have been
// applied. When the caller ends the claim again, an end applied earlier is
// reported as done (nil for the same kind of end, ErrNotHeld for another),
// not as a lost claim; a claim that was really lost in between is still
// ErrLost; and when the server's history that would tell is compacted, the
// answer says that the outcome is unknown rather than either.
func testQueueUnsureEnds(t *testing.T, c *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mode atomic.Int32
	lose := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.KV/Txn" {
			switch mode.Swap(replyKept) {
			case replyLostApplied:
				if err := invoke(ctx, method, req, reply, cc, opts...); err != nil {
					return err
				}
				return status.Error(codes.Unavailable, "the answer was lost")
			case replyLostBefore:
				return status.Error(codes.Unavailable, "the request was not sent")
			}
		}
		return invoke(ctx, method, req, reply, cc, opts...)
	}
	b := interceptedBackend(t, c, "qunsure/", lose)
	raw := c.client(t)
	n := 0
	claim := func(t *testing.T, opts ...baton.PutOption) (baton.Queue, *baton.Job) {
		t.Helper()
		n++
		q := must(b.Queue(ctx, "jobs"+strings.Repeat("x", n))).get(t)
		if _, err := q.Put(ctx, []byte("x"), opts...); err != nil {
			t.Fatal(err)
		}
		j, err := q.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return q, j
	}
	unsure := func(t *testing.T, m int32, end func() error) {
		t.Helper()
		mode.Store(m)
		if err := end(); err == nil || errors.Is(err, baton.ErrLost) {
			t.Fatalf("an end whose answer was lost: %v, want an error of unknown outcome", err)
		}
	}
	t.Run("AckApplied", func(t *testing.T) {
		q, j := claim(t)
		unsure(t, replyLostApplied, func() error { return j.Ack(ctx) })
		if err := j.Ack(ctx); err != nil {
			t.Fatalf("the Ack again, after one that was applied: %v", err)
		}
		queuecheck.Stats(t, ctx, q, baton.QueueStats{})
	})
	t.Run("RetryApplied", func(t *testing.T) {
		q, j := claim(t)
		unsure(t, replyLostApplied, func() error { return j.Retry(ctx, 0) })
		if err := j.Retry(ctx, 0); err != nil {
			t.Fatalf("the Retry again, after one that was applied: %v", err)
		}
		queuecheck.Stats(t, ctx, q, baton.QueueStats{Ready: 1})
		j2, err := q.Claim(ctx)
		if err != nil || j2.Attempt() != 2 {
			t.Fatalf("the job put back: %v, %v", j2, err)
		}
		if err := j2.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("AckAppliedThenRetry", func(t *testing.T) {
		q, j := claim(t)
		unsure(t, replyLostApplied, func() error { return j.Ack(ctx) })
		if err := j.Retry(ctx, 0); !errors.Is(err, baton.ErrNotHeld) {
			t.Fatalf("a Retry after an Ack that was applied: %v, want ErrNotHeld", err)
		}
		queuecheck.Stats(t, ctx, q, baton.QueueStats{})
	})
	t.Run("RetryNotAppliedThenFailApplied", func(t *testing.T) {
		q, j := claim(t, baton.MaxAttempts(1))
		unsure(t, replyLostBefore, func() error { return j.Retry(ctx, time.Hour) })
		unsure(t, replyLostApplied, func() error { return j.Fail(ctx, "broken") })
		if err := j.Fail(ctx, "broken"); err != nil {
			t.Fatalf("the Fail again, after one that was applied: %v", err)
		}
		queuecheck.Stats(t, ctx, q, baton.QueueStats{Dead: 1})
	})
	t.Run("NotAppliedThenLost", func(t *testing.T) {
		q, j := claim(t)
		unsure(t, replyLostBefore, func() error { return j.Ack(ctx) })
		// The claim key goes as when its lease ends.
		resp, err := raw.Get(ctx, "qunsure/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		gone := 0
		for _, kv := range resp.Kvs {
			if k := string(kv.Key); strings.Contains(k, "/jobs"+strings.Repeat("x", n)+"/c/") {
				if _, err := raw.Delete(ctx, k); err != nil {
					t.Fatal(err)
				}
				gone++
			}
		}
		if gone != 1 {
			t.Fatalf("%d claim keys deleted, want 1", gone)
		}
		if err := j.Ack(ctx); !errors.Is(err, baton.ErrLost) {
			t.Fatalf("the Ack of a claim lost after an Ack that was not applied: %v, want ErrLost", err)
		}
		queuecheck.Stats(t, ctx, q, baton.QueueStats{Ready: 1})
	})
	t.Run("HistoryCompacted", func(t *testing.T) {
		q, j := claim(t)
		unsure(t, replyLostApplied, func() error { return j.Ack(ctx) })
		resp, err := raw.Get(ctx, "qunsure/none")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Compact(ctx, resp.Header.Revision); err != nil {
			t.Fatal(err)
		}
		if err := j.Ack(ctx); err == nil || errors.Is(err, baton.ErrLost) {
			t.Fatalf("the Ack again, with the history compacted: %v, want an error of unknown outcome", err)
		}
		queuecheck.Stats(t, ctx, q, baton.QueueStats{})
	})
}
