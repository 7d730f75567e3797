package pglock

// Work queues (baton.Queue) keep their jobs in one table of rows, every
// queue's: a job is pending (state 0: ready once ready_at has passed),
// claimed (1: token and lease_until of its claim, claimant the server
// process of the session that renews it) or dead (2: reason, died). Ready
// jobs are claimed in (ready_at, id) order, FOR UPDATE SKIP LOCKED, so
// claimants of one queue do not wait for each other's rows; a claim whose
// lease passed is claimable again in its place (ready_at is kept). Tokens
// come from the queue's row of baton_queues, advanced in the claim
// statement: that row orders concurrent claims, so a token is above every
// token the queue gave before. Rows of baton_queues are never deleted, and
// a new one starts at the server's clock in microseconds.
const jobsSchemaSQL = `
SELECT pg_advisory_xact_lock(hashtextextended('baton_jobs', 0));
CREATE TABLE IF NOT EXISTS baton_jobs (
	id bigint PRIMARY KEY, queue text NOT NULL, payload bytea NOT NULL, ukey text,
	state smallint NOT NULL, ready_at timestamptz NOT NULL,
	attempts integer NOT NULL, max_attempts integer NOT NULL,
	token bigint, lease_until timestamptz, claimant integer,
	reason text, died timestamptz);
CREATE UNIQUE INDEX IF NOT EXISTS baton_jobs_ukey ON baton_jobs (queue, ukey) WHERE state < 2 AND ukey IS NOT NULL;
CREATE INDEX IF NOT EXISTS baton_jobs_ready ON baton_jobs (queue, ready_at, id) WHERE state = 0;
CREATE INDEX IF NOT EXISTS baton_jobs_claimed ON baton_jobs (queue, lease_until) WHERE state = 1;
CREATE INDEX IF NOT EXISTS baton_jobs_dead ON baton_jobs (queue, died, id) WHERE state = 2;
CREATE SEQUENCE IF NOT EXISTS baton_job_seq AS bigint;
CREATE TABLE IF NOT EXISTS baton_queues (queue text PRIMARY KEY, token bigint NOT NULL);
ALTER TABLE baton_queues ADD COLUMN IF NOT EXISTS waiting integer NOT NULL DEFAULT 0;
`

// jobsSchemaDoneSQL tells whether every object of jobsSchemaSQL exists.
const jobsSchemaDoneSQL = `SELECT to_regclass('baton_jobs_ukey') IS NOT NULL AND to_regclass('baton_jobs_ready') IS NOT NULL
	AND to_regclass('baton_jobs_claimed') IS NOT NULL AND to_regclass('baton_jobs_dead') IS NOT NULL
	AND to_regclass('baton_job_seq') IS NOT NULL AND EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = to_regclass('baton_queues') AND attname = 'waiting' AND NOT attisdropped)`

const (
	// $1 queue.
	jobsOpenSQL = `INSERT INTO baton_queues (queue, token)
VALUES ($1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint) ON CONFLICT (queue) DO NOTHING`

	// $1 queue, $2 payload, $3 key (NULL: none), $4 delay ms, $5 max
	// attempts. The id of the job, or of the pending job of the key; no
	// row when that job ended after the conflict (the caller tries again).
	jobsPutSQL = `WITH ` + jobsInsert + `
` + jobsPending

	jobsInsert = `ins AS (
	INSERT INTO baton_jobs (id, queue, payload, ukey, state, ready_at, attempts, max_attempts)
	VALUES (nextval('baton_job_seq'), $1::text, $2::bytea, $3::text, 0,
		clock_timestamp() + $4::bigint * interval '1 millisecond', 0, $5::integer)
	ON CONFLICT (queue, ukey) WHERE state < 2 AND ukey IS NOT NULL DO NOTHING RETURNING id)`
	jobsPending = `SELECT id FROM ins UNION ALL
SELECT id FROM baton_jobs WHERE queue = $1::text AND ukey = $3::text AND state < 2 AND NOT EXISTS (SELECT 1 FROM ins)`

	// $1 queue, $2 payloads, $3 keys (NULL: none), $4 delays ms, $5 max
	// attempts: jobsPutSQL for many jobs in one statement. A row per job,
	// in the order given: its place (from 1) and its id, the id of the
	// pending job of its key (put before, or earlier in the batch), or NULL
	// when that job ended after the conflict (the caller tries again). The
	// ids are drawn in the order given, before the insert, so that the
	// rows it returns can be matched to their places; a job skipped for its
	// key leaves a gap in the sequence.
	jobsPutManySQL = `WITH j AS (
	SELECT nextval('baton_job_seq') AS id, u.* FROM unnest($2::bytea[], $3::text[], $4::bigint[], $5::integer[])
		WITH ORDINALITY AS u(payload, ukey, delay, maxa, ord) ORDER BY u.ord),
ins AS (
	INSERT INTO baton_jobs (id, queue, payload, ukey, state, ready_at, attempts, max_attempts)
	SELECT id, $1::text, payload, ukey, 0, clock_timestamp() + delay * interval '1 millisecond', 0, maxa FROM j ORDER BY ord
	ON CONFLICT (queue, ukey) WHERE state < 2 AND ukey IS NOT NULL DO NOTHING RETURNING id, ukey)
SELECT j.ord, CASE WHEN EXISTS (SELECT 1 FROM ins WHERE ins.id = j.id) THEN j.id
	ELSE coalesce((SELECT ins.id FROM ins WHERE ins.ukey = j.ukey),
		(SELECT p.id FROM baton_jobs p WHERE p.queue = $1::text AND p.ukey = j.ukey AND p.state < 2)) END
FROM j ORDER BY j.ord`

	// $1 queue. The notification of a Put, sent only while a claimant of
	// the queue counts itself waiting (jobsWaitingSQL): read after the
	// Put's commit, as a claimant counts itself before its last look, so
	// that either the claimant's look finds the job or this finds the
	// claimant.
	jobsWakeSQL = `SELECT pg_notify('` + channel + `', 'q/' || $1::text)::text FROM baton_queues WHERE queue = $1 AND waiting > 0`

	// $1 queue, $2 +1 or -1: a claimant about to sleep, or done waiting.
	jobsWaitingSQL = `UPDATE baton_queues SET waiting = greatest(waiting + $2::integer, 0) WHERE queue = $1`

	// $1 queue.
	jobsNotifySQL = `SELECT pg_notify('` + channel + `', 'q/' || $1::text)`

	// $1 queue, $2 n, $3 lease ms, $4 claimants (server pids, the k-th
	// for the k-th job in claim order), $5 and $6 the (ready_at, id) the
	// ready jobs are read from (the Backend's claim head, jobs_head.go; the
	// year 1 reads from the first). The ready
	// jobs and the lapsed claims are read apart, each by its own index in
	// claim order, so that a claim reads about n rows of each, not the
	// whole backlog (one scan of both would read and sort every row); the
	// n oldest of both are claimed, and the others locked on the way are
	// let go at the statement's end. The update finds its rows by their
	// ids as an array: joined to r alone, the planner may hash r and scan
	// the whole table for a few rows. A row's ready_at is returned for the
	// claim head.
	jobsClaimSQL = `WITH c0 AS (
	SELECT id, ready_at FROM baton_jobs
	WHERE queue = $1 AND state = 0 AND ready_at <= clock_timestamp() AND (ready_at, id) >= ($5::timestamptz, $6::bigint)
	ORDER BY ready_at, id LIMIT $2 FOR UPDATE SKIP LOCKED),
c1 AS (
	SELECT id, ready_at FROM baton_jobs
	WHERE queue = $1 AND state = 1 AND lease_until < clock_timestamp() AND attempts < max_attempts
	ORDER BY ready_at, id LIMIT $2 FOR UPDATE SKIP LOCKED),
c AS (SELECT id, ready_at FROM (SELECT * FROM c0 UNION ALL SELECT * FROM c1) u ORDER BY ready_at, id LIMIT $2),
r AS (SELECT id, row_number() OVER (ORDER BY ready_at, id) AS k, count(*) OVER () AS n FROM c),
t AS (UPDATE baton_queues SET token = token + (SELECT count(*) FROM c)
	WHERE queue = $1 AND EXISTS (SELECT 1 FROM c) RETURNING token)
UPDATE baton_jobs j SET state = 1, attempts = j.attempts + 1, token = t.token - r.n + r.k,
	lease_until = clock_timestamp() + $3::bigint * interval '1 millisecond', claimant = ($4::integer[])[r.k]
FROM r, t WHERE j.id = r.id AND j.id = ANY (ARRAY(SELECT id FROM r))
RETURNING j.id, j.payload, j.attempts, j.max_attempts, j.token, j.ready_at`

	// jobsClaimSQL for one job, with $2 the lease ms, $3 the claimant, $4
	// and $5 where the ready jobs are read from: the claimed rows need no
	// numbering and counting, which a lone claim, the common one, would
	// pay for nothing.
	jobsClaimOneSQL = `WITH c0 AS (
	SELECT id, ready_at FROM baton_jobs
	WHERE queue = $1 AND state = 0 AND ready_at <= clock_timestamp() AND (ready_at, id) >= ($4::timestamptz, $5::bigint)
	ORDER BY ready_at, id LIMIT 1 FOR UPDATE SKIP LOCKED),
c1 AS (
	SELECT id, ready_at FROM baton_jobs
	WHERE queue = $1 AND state = 1 AND lease_until < clock_timestamp() AND attempts < max_attempts
	ORDER BY ready_at, id LIMIT 1 FOR UPDATE SKIP LOCKED),
c AS (SELECT id FROM (SELECT * FROM c0 UNION ALL SELECT * FROM c1) u ORDER BY ready_at, id LIMIT 1),
t AS (UPDATE baton_queues SET token = token + 1 WHERE queue = $1 AND EXISTS (SELECT 1 FROM c) RETURNING token)
UPDATE baton_jobs j SET state = 1, attempts = j.attempts + 1, token = t.token,
	lease_until = clock_timestamp() + $2::bigint * interval '1 millisecond', claimant = $3
FROM c, t WHERE j.id = c.id
RETURNING j.id, j.payload, j.attempts, j.max_attempts, j.token, j.ready_at`

	// $1 queue. Buries the claims that lapsed on their last attempt, and
	// returns the ms until the next job is ready or lease passes (NULL:
	// none).
	jobsNextSQL = `WITH b AS (UPDATE baton_jobs SET state = 2, died = clock_timestamp(),
	reason = 'claim lease expired on its last attempt', token = NULL, lease_until = NULL
	WHERE queue = $1 AND state = 1 AND lease_until < clock_timestamp() AND attempts >= max_attempts RETURNING id)
SELECT (SELECT count(*) FROM b),
	extract(epoch FROM (SELECT min(x) FROM (
		SELECT min(ready_at) AS x FROM baton_jobs WHERE queue = $1 AND state = 0
		UNION ALL SELECT min(lease_until) FROM baton_jobs WHERE queue = $1 AND state = 1) m) - clock_timestamp()) * 1000`

	// $1 id, $2 token, $3 lease ms.
	jobsRenewSQL = `UPDATE baton_jobs SET lease_until = clock_timestamp() + $3::bigint * interval '1 millisecond'
WHERE id = $1 AND token = $2 AND state = 1 AND lease_until >= clock_timestamp()`

	// $1 id.
	jobsExistsSQL = `SELECT EXISTS (SELECT 1 FROM baton_jobs WHERE id = $1)`

	// $1 id, $2 token.
	jobsAckSQL = `DELETE FROM baton_jobs WHERE id = $1 AND token = $2 AND state = 1 AND lease_until >= clock_timestamp() RETURNING id`

	// $1 ids, $2 their tokens: the ids of the rows deleted. The rows are
	// found by id alone, by the primary key, and each one's token is looked
	// up beside its id (joined to the pairs, the planner may scan the
	// whole table).
	jobsAckManySQL = `DELETE FROM baton_jobs j WHERE j.id = ANY ($1::bigint[])
	AND j.token = ($2::bigint[])[array_position($1::bigint[], j.id)]
	AND j.state = 1 AND j.lease_until >= clock_timestamp() RETURNING j.id`

	// $1 id, $2 token, $3 delay ms (0: now), $4 reason. Ready again at the
	// back of the line, or dead after the last attempt.
	jobsRetrySQL = `WITH u AS (UPDATE baton_jobs SET token = NULL, lease_until = NULL,
	state = CASE WHEN attempts >= max_attempts THEN 2 ELSE 0 END,
	ready_at = clock_timestamp() + $3::bigint * interval '1 millisecond',
	reason = CASE WHEN attempts >= max_attempts THEN $4::text END,
	died = CASE WHEN attempts >= max_attempts THEN clock_timestamp() END
	WHERE id = $1 AND token = $2 AND state = 1 AND lease_until >= clock_timestamp() RETURNING queue)
SELECT pg_notify('` + channel + `', 'q/' || queue)::text FROM u`

	// $1 ids, $2 tokens, $3 queue. Claims of a handle being closed, in
	// line again where they stood (or dead after the last attempt).
	jobsGiveBackSQL = `WITH u AS (UPDATE baton_jobs j SET token = NULL, lease_until = NULL,
	state = CASE WHEN attempts >= max_attempts THEN 2 ELSE 0 END,
	reason = CASE WHEN attempts >= max_attempts THEN 'claim given back on its last attempt' END,
	died = CASE WHEN attempts >= max_attempts THEN clock_timestamp() END
	FROM unnest($1::bigint[], $2::bigint[]) AS g(id, token)
	WHERE j.id = g.id AND j.token = g.token AND j.state = 1 RETURNING 1)
SELECT count(*), pg_notify('` + channel + `', 'q/' || $3::text)::text FROM u`

	// $1 queue.
	jobsStatsSQL = `SELECT
	count(*) FILTER (WHERE (state = 0 AND ready_at <= clock_timestamp())
		OR (state = 1 AND lease_until < clock_timestamp() AND attempts < max_attempts)),
	count(*) FILTER (WHERE state = 0 AND ready_at > clock_timestamp()),
	count(*) FILTER (WHERE state = 1 AND (lease_until >= clock_timestamp() OR attempts >= max_attempts)),
	count(*) FILTER (WHERE state = 2)
FROM baton_jobs WHERE queue = $1`

	// $1 queue, $2 limit.
	jobsDeadSQL = `SELECT id, payload, attempts, coalesce(reason, ''), died FROM baton_jobs
WHERE queue = $1 AND state = 2 ORDER BY died, id LIMIT $2`

	// $1 queue, $2 ids. A dead letter whose key a pending job holds stays.
	jobsRequeueSQL = `WITH u AS (UPDATE baton_jobs j SET state = 0, attempts = 0, reason = NULL, died = NULL,
	ready_at = clock_timestamp()
	WHERE j.queue = $1 AND j.id = ANY($2::bigint[]) AND j.state = 2 AND (j.ukey IS NULL OR NOT EXISTS (
		SELECT 1 FROM baton_jobs p WHERE p.queue = $1 AND p.ukey = j.ukey AND p.state < 2)) RETURNING 1)
SELECT count(*), pg_notify('` + channel + `', 'q/' || $1::text)::text FROM u`

	// $1 queue, $2 ids.
	jobsPurgeSQL = `WITH d AS (DELETE FROM baton_jobs WHERE queue = $1 AND id = ANY($2::bigint[]) AND state = 2 RETURNING 1)
SELECT count(*) FROM d`
)

func init() {
	statements = append(statements, jobsSchemaSQL, jobsSchemaDoneSQL, jobsOpenSQL, jobsPutSQL, jobsPutManySQL, jobsWakeSQL, jobsWaitingSQL, jobsNotifySQL, jobsClaimSQL, jobsClaimOneSQL, jobsNextSQL,
		jobsRenewSQL, jobsExistsSQL, jobsAckSQL, jobsAckManySQL, jobsRetrySQL, jobsGiveBackSQL, jobsStatsSQL, jobsDeadSQL,
		jobsRequeueSQL, jobsPurgeSQL)
}
