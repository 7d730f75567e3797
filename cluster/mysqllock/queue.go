package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
)

// Work queues (baton.Queue), in the table prefix + "job": one row per job,
// (queue, id) its key. A pending job has state 0; a claim is the row's
// owner and expires (a lease of the TTL, counted by the server's clock,
// renewed in the background through the pool like the lock rows), so a
// claim survives a KILL of any connection and ends only with its lease;
// the claimant's loss deadline (send time of its last renewal + TTL -
// drift) passes before the server's expiry, so its Loss fires before
// anyone can claim the job again. A claim is one transaction: SELECT ...
// FOR UPDATE SKIP LOCKED of the oldest ready rows, then the update that
// takes them and draws their tokens from the queue's counter in the lock
// table (row "q:<name>"); ids come from the row "Q:<name>", whose counter
// every change that makes a job ready also moves (the wake-up generation).
//
// Wake-ups (bell.go): a waiting claimant sleeps while the generation is
// unchanged; whoever makes a job ready moves the generation and then
// interrupts the sleeping statements of the queue. That costs each Put,
// Retry or give-back a read of the process list and a KILL QUERY per
// sleeping claimant (nothing while no claimant has counted itself as
// sleeping: the statement moving the generation reads the count, see
// drawIDs). A sleeper's slice is the TTL, or shorter when a delayed job
// or a claim's lease ends first, which it knows: a claim's lease that runs
// out (its claimant died) wakes the sleepers by that time.

// queueMaxPayload is the largest payload: 4 MiB, under the server's
// default max_allowed_packet (16 MiB on MariaDB, 64 MiB on MySQL), which
// bounds a PutBatch as a whole (read at open).
const queueMaxPayload = 4 << 20

var errQueueServer = errors.New("work queues need MariaDB 10.6 or MySQL 8.0 or later (SELECT ... FOR UPDATE SKIP LOCKED)")

// queueDriver is one handle of a queue.
type queueDriver struct {
	b                *backend
	name             string
	job              string // the job table
	ids, toks, count string // lock table rows: id counter, tokens, sleepers counted
	mark             string // the sleepers' statements'
	packet           int    // max_allowed_packet
	closeOnce        sync.Once
	renewStop        chan struct{}

	multi bool // the connections run requests of several statements (queue_multi.go)
	// guard starts the first request of a claim that spans two (see
	// txGuard); empty when the server has no such setting.
	guard string
	calls *queueCalls

	mu     sync.Mutex
	claims map[string]*qclaim // guarded by mu; by owner
	closed bool               // guarded by mu
}

type qclaim struct {
	id      uint64
	owner   string
	loss    *driver.Loss
	attempt int
	max     int
}

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)`)

// serverSupportsQueues checks VERSION(): MariaDB 10.6+, MySQL 8.0+.
func serverSupportsQueues(v string) bool {
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return false
	}
	maj, _ := strconv.Atoi(m[1])
	mnr, _ := strconv.Atoi(m[2])
	if strings.Contains(strings.ToLower(v), "mariadb") {
		return maj > 10 || maj == 10 && mnr >= 6
	}
	return maj >= 8
}

// txGuard is what bounds, on MariaDB, how long a claim's transaction can
// stay open while its client does not answer: a claim of several jobs
// takes two requests, and its pick keeps locked until the commit the
// claimed rows it passed (InnoDB keeps a locking read's locks on rows
// that do not match, under READ COMMITTED too), whose renewals then wait
// for it. The server ends a session idle inside a transaction that long,
// which rolls the claim back: half a renewal period in whole seconds, at
// least 1 s. MySQL has no such setting (""): there a claimant stalled
// between the requests for about a lease makes those claims lose their
// leases.
func txGuard(version string, renewEvery time.Duration) string {
	if !strings.Contains(strings.ToLower(version), "mariadb") {
		return ""
	}
	return fmt.Sprintf("SET SESSION idle_transaction_timeout = %d; ", max(1, int(renewEvery/2/time.Second)))
}

// OpenQueue checks the server, creates the job table when it is missing
// and the queue's counter rows (driver.QueueOpener).
func (b *backend) OpenQueue(ctx context.Context, name string) (driver.Queue, error) {
	var v string
	var packet int
	if err := b.db.QueryRowContext(ctx, `SELECT VERSION(), @@max_allowed_packet`).Scan(&v, &packet); err != nil {
		return nil, err
	}
	if !serverSupportsQueues(v) {
		return nil, fmt.Errorf("%w: %w; the server is %s", baton.ErrUnsupported, errQueueServer, v)
	}
	d := &queueDriver{b: b, name: name, job: "`" + b.c.Prefix + "job`", ids: key('Q', name), toks: key('q', name), count: key('W', name),
		packet: packet, claims: make(map[string]*qclaim), renewStop: make(chan struct{})}
	d.mark = "baton-queue-wait " + b.userLock(d.ids)
	if _, err := b.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+d.job+` (
			queue VARBINARY(255) NOT NULL,
			id BIGINT UNSIGNED NOT NULL,
			state TINYINT NOT NULL DEFAULT 0,
			ready_at DATETIME(6) NOT NULL,
			attempts INT NOT NULL DEFAULT 0,
			max_attempts INT NOT NULL,
			ukey VARBINARY(128) NULL,
			ukey_live VARBINARY(128) NULL,
			owner VARBINARY(64) NOT NULL DEFAULT '',
			expires DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00',
			token BIGINT UNSIGNED NOT NULL DEFAULT 0,
			reason VARBINARY(1024) NOT NULL DEFAULT '',
			died DATETIME(6) NULL,
			payload LONGBLOB NOT NULL,
			PRIMARY KEY (queue, id),
			UNIQUE KEY (queue, ukey_live),
			KEY (queue, state, ready_at, id)
		) ENGINE=InnoDB`); err != nil {
		return nil, fmt.Errorf("create job table: %w", err)
	}
	for _, k := range []string{d.ids, d.toks} {
		if _, err := b.ensureRow(ctx, k, 0); err != nil {
			return nil, err
		}
	}
	// The sleepers' count starts at 0, not at the floor's counter.
	if _, err := b.db.ExecContext(ctx, `INSERT IGNORE INTO `+b.t.lock+` (name) VALUES (?)`, d.count); err != nil {
		return nil, err
	}
	d.multi = probeMulti(ctx, b.db)
	d.guard = txGuard(v, b.c.RenewEvery)
	if err := b.track(d, func() { d.Close() }); err != nil {
		return nil, err
	}
	d.calls = b.queues.Hold(name)
	go d.renewals()
	return d, nil
}

// MaxPayload is 4 MiB (see queueMaxPayload).
func (d *queueDriver) MaxPayload() int { return queueMaxPayload }

// retryable reports a transaction that lost a deadlock or a lock wait, to
// be run again.
func retryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// Put adds the jobs in one transaction (see PutTx), then wakes sleepers.
func (d *queueDriver) Put(ctx context.Context, jobs []driver.PutJob) ([]uint64, error) {
	size := 0
	for _, j := range jobs {
		size += len(j.Payload) + len(j.Key) + 256
	}
	if size > d.packet-4096 {
		return nil, fmt.Errorf("%w: %d jobs take about %d bytes, over the server's max_allowed_packet (%d)", baton.ErrInvalidArgument, len(jobs), size, d.packet)
	}
	for {
		bctx, cancel := d.b.bg(ctx)
		ids, sleepers, err := d.putOnce(bctx, jobs)
		cancel()
		if err == nil {
			if sleepers {
				d.wakeSleepers()
			}
			return ids, nil
		}
		if !retryable(err) {
			return nil, err
		}
	}
}

func (d *queueDriver) putOnce(ctx context.Context, jobs []driver.PutJob) ([]uint64, bool, error) {
	if d.multi && noKeys(jobs) {
		return d.putMulti(ctx, jobs)
	}
	tx, err := d.b.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback()
	ids, sleepers, err := putJobs(ctx, tx, d.job, d.b.t.lock, d.name, jobs, d.count)
	if err != nil {
		return nil, false, err
	}
	return ids, sleepers, tx.Commit()
}

// putJobs adds jobs to queue name inside tx: the ids are drawn from the
// queue's counter row (which also moves the wake-up generation), and a
// job whose key is pending returns the pending job's id.
func putJobs(ctx context.Context, tx *sql.Tx, job, lock, name string, jobs []driver.PutJob, sleepRow string) ([]uint64, bool, error) {
	held := map[string]uint64{}
	var keys []any
	for _, j := range jobs {
		if j.Key != "" {
			keys = append(keys, j.Key)
		}
	}
	// The counter row first: concurrent Puts of the queue go one at a
	// time from here, so a key read free below stays free. Without keys
	// every job is new, and its ids are drawn here at once.
	draw := len(jobs)
	if len(keys) > 0 {
		draw = 0
	}
	last, sleepers, err := drawIDs(ctx, tx, lock, name, draw, sleepRow)
	if err != nil {
		return nil, false, err
	}
	if len(keys) > 0 {
		rows, err := tx.QueryContext(ctx, `SELECT ukey_live, id FROM `+job+` WHERE queue = ? AND ukey_live IN (`+inList(len(keys))+`)`, append([]any{name}, keys...)...)
		if err != nil {
			return nil, false, err
		}
		for rows.Next() {
			var k string
			var id uint64
			if err := rows.Scan(&k, &id); err != nil {
				rows.Close()
				return nil, false, err
			}
			held[k] = id
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, false, err
		}
	}
	ids := make([]uint64, len(jobs))
	var vals []string
	var args []any
	seq := last
	for i, j := range jobs {
		if id, ok := held[j.Key]; ok && j.Key != "" {
			ids[i] = id
			continue
		}
		seq++
		ids[i] = seq
		var k any
		if j.Key != "" {
			held[j.Key] = seq
			k = j.Key
		}
		at := "UTC_TIMESTAMP(6)"
		if !j.At.IsZero() {
			at = "GREATEST(UTC_TIMESTAMP(6), ?)"
		}
		vals = append(vals, "(?, ?, "+at+", ?, ?, ?, ?)")
		args = append(args, name, seq)
		if !j.At.IsZero() {
			args = append(args, j.At.UTC())
		}
		payload := j.Payload
		if payload == nil {
			payload = []byte{}
		}
		args = append(args, j.MaxAttempts, k, k, payload)
	}
	if seq > last+uint64(draw) {
		if _, err := tx.ExecContext(ctx, `UPDATE `+lock+` SET token = ? WHERE name = ?`, seq, key('Q', name)); err != nil {
			return nil, false, err
		}
	}
	if len(vals) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+job+` (queue, id, ready_at, max_attempts, ukey, ukey_live, payload) VALUES `+strings.Join(vals, ", "), args...); err != nil {
			return nil, false, err
		}
	}
	return ids, sleepers && seq > last, nil
}

// execer is a *sql.Tx or a *sql.DB.
type execer interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}

// drawIDs adds n to the id counter of queue name (the wake-up generation)
// and returns its value before, creating the row if it is missing. With
// sleepRow (the row counting the queue's sleeping claimants) it also
// reports, in the same statement, whether claimants may sleep: the row
// stays locked until tx ends (a transaction, or the statement itself), so
// a claimant counting itself afterwards reads the generation this commit
// moves (see wakeSleepers). The answer comes back as rows affected: the
// counter's row counts 2 when changed (n > 0), 1 when inserted and 0 when
// neither; sleepRow counts 2 when it has sleepers (the toggle of its
// capacity, unused, changes it), 1 when inserted (none) and 0 otherwise. A total that both a toggle and no
// toggle could give counts as sleepers: a wake-up too many costs a read
// of the process list, one too few a sleeper's slice.
func drawIDs(ctx context.Context, tx execer, lock, name string, n int, sleepRow string) (uint64, bool, error) {
	query, args := drawSQL(lock, name, n, sleepRow)
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, false, err
	}
	next, err := res.LastInsertId()
	if err != nil {
		return 0, false, err
	}
	var affected int64
	if sleepRow != "" {
		if affected, err = res.RowsAffected(); err != nil {
			return 0, false, err
		}
	}
	last, sleepers := drawResult(next, affected, n, sleepRow)
	return last, sleepers, nil
}

// drawSQL is drawIDs' statement.
func drawSQL(lock, name string, n int, sleepRow string) (string, []any) {
	q := key('Q', name)
	vals, args := "(?, LAST_INSERT_ID(?))", []any{q, n}
	if sleepRow != "" {
		vals, args = vals+", (?, 0)", append(args, sleepRow)
	}
	return `INSERT INTO ` + lock + ` (name, token) VALUES ` + vals +
		` ON DUPLICATE KEY UPDATE token = IF(name = ?, LAST_INSERT_ID(token + ?), token),` +
		` capacity = IF(name = ? OR CAST(token AS SIGNED) <= 0, capacity, 1 - capacity)`, append(args, q, n, q)
}

// drawResult reads drawIDs' answer from the statement's LAST_INSERT_ID()
// and rows affected.
func drawResult(next, affected int64, n int, sleepRow string) (uint64, bool) {
	if sleepRow == "" {
		return uint64(next) - uint64(n), false
	}
	limit := int64(2) // n == 0: 0 or 1 for the counter, 0 or 1 without sleepers
	if n > 0 {
		limit = 3 // 2 or 1 for the counter, 0 or 1 without sleepers
	}
	return uint64(next) - uint64(n), affected >= limit
}
