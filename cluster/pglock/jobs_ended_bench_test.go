package pglock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonlock/baton/cluster/internal/queuecheck"
	"github.com/batonlock/baton/cluster/lease"
)

// BenchmarkQueueEnded: TryClaim+Ack at the head of 500 waiting jobs, after
// N jobs of the queue were claimed (their leases long passed) and ended
// since the table was last vacuumed (autovacuum off for the table
// meanwhile, as between two of its runs). The ready and claimed indexes
// keep an entry for each ended row version until then, and a claim reads
// both from the queue's first entry: the ready jobs from the oldest, the
// lapsed claims through every claimed version whose lease passed (the
// bound is clock_timestamp(), which the index cannot take).
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
			defer admin.Exec(ctx, `VACUUM baton_jobs; ALTER TABLE baton_jobs RESET (autovacuum_enabled)`)
			if ended > 0 {
				if _, err := admin.Exec(ctx, `INSERT INTO baton_jobs (id, queue, payload, state, ready_at, attempts, max_attempts)
SELECT nextval('baton_job_seq'), $1, 'job', 0, clock_timestamp(), 0, 3 FROM generate_series(1, $2::int)`, name, ended); err != nil {
					b.Fatal(err)
				}
				if _, err := admin.Exec(ctx, `UPDATE baton_jobs SET state = 1, attempts = 1, token = id, lease_until = clock_timestamp() - interval '1 hour' WHERE queue = $1`, name); err != nil {
					b.Fatal(err)
				}
				if _, err := admin.Exec(ctx, `DELETE FROM baton_jobs WHERE queue = $1`, name); err != nil {
					b.Fatal(err)
				}
			}
			queuecheck.PutJobs(b, q, 500+b.N)
			b.ResetTimer()
			queuecheck.ClaimAck(b, q)
		})
	}
}
