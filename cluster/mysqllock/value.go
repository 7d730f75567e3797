package mysqllock

import (
	"context"
	"database/sql"
	"strconv"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/sqlcommon"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// A Value is a row of the value table: its data and a version that each
// successful CompareAndSwap moves up by one, in the one statement that
// checks the old version (UPDATE ... WHERE version = old; the row lock
// orders concurrent writers). The row is never deleted, so versions never
// go back.
//
// Waiting sleeps in the server (bell.go): one sleeper per Backend and
// name, whatever the number of waiting goroutines and handles, while the
// version is the one it last saw; every successful write rings the name.
// A write made through the same Backend wakes its waiters at once.

// pollMax is the pause after a failed read or sleep.
const pollMax = 25 * time.Millisecond

type value struct {
	b    *backend
	name string
}

func (b *backend) OpenValue(ctx context.Context, name string) (driver.Value, error) {
	return &value{b: b, name: name}, nil
}

func (v *value) Load(ctx context.Context) ([]byte, uint64, error) {
	var ver uint64
	var data []byte
	err := v.b.db.QueryRowContext(ctx, `SELECT version, data FROM `+v.b.t.value+` WHERE name = ?`, v.name).Scan(&ver, &data)
	return sqlcommon.ValueRow(ctx, data, ver, err, sql.ErrNoRows)
}

func (v *value) CompareAndSwap(ctx context.Context, old uint64, data []byte) (uint64, error) {
	if data == nil {
		data = []byte{}
	}
	var res sql.Result
	var err error
	if old == 0 {
		// IGNORE: a row already there is a conflict, whatever the DSN's
		// clientFoundRows says about rows matched.
		res, err = v.b.db.ExecContext(ctx, `INSERT IGNORE INTO `+v.b.t.value+` (name, version, data) VALUES (?, 1, ?)`, v.name, data)
	} else {
		res, err = v.b.db.ExecContext(ctx, `UPDATE `+v.b.t.value+` SET version = version + 1, data = ? WHERE name = ? AND version = ?`,
			data, v.name, old)
	}
	if err != nil {
		return 0, lease.CtxErr(ctx, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, lease.CtxErr(ctx, err)
	}
	if n == 0 {
		// A statement of its own: it sees the write that refused this one.
		var now uint64
		err := v.b.db.QueryRowContext(ctx, `SELECT COALESCE((SELECT version FROM `+v.b.t.value+` WHERE name = ?), 0)`, v.name).Scan(&now)
		if err != nil {
			return 0, lease.CtxErr(ctx, err)
		}
		return now, baton.ErrConflict
	}
	v.b.valueWritten(v.name, old+1)
	v.b.ring(v.b.mark(key('v', v.name)))
	return old + 1, nil
}

// Wait takes the poller's channel before it loads, so that a change after
// the load closes that channel or a later one.
func (v *value) Wait(ctx context.Context, ver uint64) ([]byte, uint64, error) {
	p := v.b.valuePoller(v.name)
	defer v.b.leaveValuePoller(v.name, p)
	return sqlcommon.WaitValue(ctx, ver, p.changed, v.Load)
}

func (v *value) Close() error { return nil }

// valuePoll is the poller of one name in a Backend: it runs while the name
// has waiters and closes its channel whenever it sees a version other than
// the last it saw.
type valuePoll struct {
	waiters int // guarded by backend.mu

	mu   sync.Mutex
	ver  uint64        // guarded by mu: the version last seen
	seen bool          // guarded by mu: ver was seen
	ch   chan struct{} // guarded by mu: closed at the next change
	stop chan struct{} // closed when the last waiter leaves
}

func (p *valuePoll) changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ch
}

// saw records version ver and wakes the waiters if it is new; it reports
// whether it was. A first sighting wakes them too, since a change may have
// come between their load and the poller's start.
func (p *valuePoll) saw(ver uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ver == p.ver && p.seen {
		return false
	}
	p.ver, p.seen = ver, true
	close(p.ch)
	p.ch = make(chan struct{})
	return true
}

func (b *backend) valuePoller(name string) *valuePoll {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.polls[name]
	if p == nil {
		p = &valuePoll{ch: make(chan struct{}), stop: make(chan struct{})}
		b.polls[name] = p
		go b.pollValue(name, p)
	}
	p.waiters++
	return p
}

func (b *backend) leaveValuePoller(name string, p *valuePoll) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.waiters--; p.waiters == 0 {
		delete(b.polls, name)
		close(p.stop)
	}
}

// valueWritten wakes the waiters of this Backend after one of its own
// writes.
func (b *backend) valueWritten(name string, ver uint64) {
	b.mu.Lock()
	p := b.polls[name]
	b.mu.Unlock()
	if p != nil {
		p.saw(ver)
	}
}

// pollValue reads the version, wakes the waiters when it moved, and sleeps
// while it stays, for a TTL at most (the slice that bounds the wait of a
// ring that did not reach it), until the last waiter leaves.
func (b *backend) pollValue(name string, p *valuePoll) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-p.stop; cancel() }()
	mark := b.mark(key('v', name))
	version := `COALESCE((SELECT version FROM ` + b.t.value + ` WHERE name = ` + binLit(name) + `), 0)`
	failing := false // a failure was logged; the next is not until a success
	for ctx.Err() == nil {
		rctx, rcancel := context.WithTimeout(ctx, b.c.RequestTimeout)
		var ver uint64
		err := b.db.QueryRowContext(rctx, `SELECT `+version).Scan(&ver)
		rcancel()
		if err == nil {
			failing = false
			p.saw(ver)
			err = b.sleepWhile(ctx, mark, version+` = `+strconv.FormatUint(ver, 10), seconds(b.c.TTL), b.c.TTL)
			if err == nil {
				continue
			}
		}
		if ctx.Err() != nil || b.closed.Load() {
			return // the Backend may be closing its pool
		}
		if !failing {
			b.c.Logger.Warn("baton: mysql value: waiting failed", "name", name, "err", err)
		}
		failing = true
		select {
		case <-ctx.Done():
		case <-time.After(pollMax):
		}
	}
}

var _ driver.ValueOpener = (*backend)(nil)
