package pglock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton/cluster/internal/queuecheck"
	"github.com/batonlock/baton/cluster/lease"
)

// BenchmarkQueueEnded: TryClaim+Ack at the head of 500 waiting jobs after
// N jobs of the queue were claimed and acked one by one since the table
// was last vacuumed (autovacuum held off for the table meanwhile, as
// between two of its runs). The index of ready jobs keeps an entry for
// each claimed job's ended version until then, and a claim reads the
// ready jobs from the queue's first entry.
func BenchmarkQueueEnded(b *testing.B) {
	for _, ended := range []int{0, 10000, 50000} {
		b.Run(fmt.Sprint(ended), func(b *testing.B) {
			ctx := context.Background()
			bk, err := OpenURL(ctx, need(b), lease.WithTTL(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			defer bk.Close()
			name := fmt.Sprint("ended-", ended, "-", time.Now().UnixNano())
			q, err := bk.Queue(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			admin := poolT(b)
			if _, err := admin.Exec(ctx, `ALTER TABLE baton_jobs SET (autovacuum_enabled = false)`); err != nil {
				b.Fatal(err)
			}
			defer func() {
				// Apart: VACUUM cannot run in the transaction that one
				// query of two statements makes.
				for _, sql := range []string{`VACUUM baton_jobs`, `ALTER TABLE baton_jobs RESET (autovacuum_enabled)`} {
					if _, err := admin.Exec(ctx, sql); err != nil {
						b.Error(err)
					}
				}
			}()
			if ended > 0 {
				queuecheck.PutJobs(b, q, ended)
				queuecheck.ClaimAck(b, q, ended)
			}
			queuecheck.PutJobs(b, q, 500+b.N)
			b.ResetTimer()
			queuecheck.ClaimAck(b, q, b.N)
		})
	}
}
