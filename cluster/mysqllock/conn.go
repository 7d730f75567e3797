package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strconv"
	"sync"
	"time"

	"github.com/batonlock/baton"
)

// sconn is a connection of the Mutex driver with its statements prepared
// once. A handle keeps one while it is open; a hold takes its handle's,
// since the connection holds the name's user-level lock, and a hold passed
// to another handle (pass.go) takes it along.
type sconn struct {
	c *sql.Conn

	mu       sync.Mutex
	stmts    map[string]*sql.Stmt // guarded by mu
	lastUsed time.Time            // guarded by mu
	dropped  bool                 // guarded by mu
}

// getConn returns the handle's connection, opening one when there is none
// or the one there was closed by the server while idle.
func (m *mutex) getConn(ctx context.Context) (*sconn, error) {
	m.mu.Lock()
	sc := m.sc
	m.mu.Unlock()
	if sc != nil && sc.idle() > 500*time.Millisecond {
		// The server ends sessions idle longer than the lease TTL: have
		// the driver check the socket before its next write, so that a
		// closed connection fails before the statement is sent.
		err := sc.c.Raw(func(dc any) error {
			if r, ok := dc.(driver.SessionResetter); ok {
				return r.ResetSession(ctx)
			}
			return nil
		})
		if err != nil {
			m.dropConn(sc)
			sc = nil
		}
	}
	if sc != nil {
		return sc, nil
	}
	var c *sql.Conn
	for try := 0; ; try++ {
		var err error
		if c, err = m.openConn(ctx); err == nil {
			break
		}
		// A pooled connection whose session the server ended (KILL, a
		// restart) fails its first statement; it held nothing, so the
		// next one of the pool serves.
		if try == 2 || ctxEnded(ctx) != nil {
			return nil, err
		}
	}
	sc = &sconn{c: c, lastUsed: time.Now()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		sc.close(m.b.c.RequestTimeout)
		return nil, baton.ErrClosed
	}
	m.sc = sc
	return sc, nil
}

// openConn takes a connection of the pool for the handle.
func (m *mutex) openConn(ctx context.Context) (*sql.Conn, error) {
	c, err := m.b.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	bctx, cancel := m.b.bg(ctx)
	defer cancel()
	// A holder whose connection goes silent (a half-open TCP connection,
	// a paused process) keeps its session, and its user-level lock, only
	// until the server ends the idle session; the lease row decides who
	// holds in any case.
	if _, err := c.ExecContext(bctx, "SET SESSION wait_timeout = "+strconv.Itoa(m.b.wait)); err != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		c.Close()
		return nil, err
	}
	return c, nil
}

func (sc *sconn) idle() time.Duration {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return time.Since(sc.lastUsed)
}

func (sc *sconn) used() {
	sc.mu.Lock()
	sc.lastUsed = time.Now()
	sc.mu.Unlock()
}

// exec runs q on sc as a statement prepared once per connection: with
// arguments, go-sql-driver otherwise prepares and closes a statement for
// every call (unless the DSN sets interpolateParams), a round trip more.
func (sc *sconn) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := sc.prepared(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (sc *sconn) prepared(ctx context.Context, q string) (*sql.Stmt, error) {
	sc.mu.Lock()
	if st := sc.stmts[q]; st != nil {
		sc.mu.Unlock()
		return st, nil
	}
	sc.mu.Unlock()
	st, err := sc.c.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.dropped {
		st.Close()
		return nil, driver.ErrBadConn
	}
	if sc.stmts == nil {
		sc.stmts = make(map[string]*sql.Stmt)
	}
	if old := sc.stmts[q]; old != nil {
		old.Close()
	}
	sc.stmts[q] = st
	return st, nil
}

// forget closes sc's statements.
func (sc *sconn) forget() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, st := range sc.stmts {
		st.Close()
	}
	sc.stmts = nil
	sc.dropped = true
}

// dropConn discards sc: the server ends its session, and with it any
// user-level lock it held.
func (m *mutex) dropConn(sc *sconn) {
	m.mu.Lock()
	if m.sc == sc {
		m.sc = nil
	}
	m.mu.Unlock()
	sc.forget()
	_ = sc.c.Raw(func(any) error { return driver.ErrBadConn })
	_ = sc.c.Close()
}

// close gives sc back to the pool, with the server's own idle timeout
// again.
func (sc *sconn) close(timeout time.Duration) {
	sc.forget()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := sc.c.ExecContext(ctx, `SET SESSION wait_timeout = @@GLOBAL.wait_timeout`); err != nil {
		_ = sc.c.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = sc.c.Close()
}

// closeConn gives the handle's connection back to the pool.
func (m *mutex) closeConn() {
	m.mu.Lock()
	sc := m.sc
	m.sc, m.closed = nil, true
	m.mu.Unlock()
	if sc != nil {
		sc.close(m.b.c.RequestTimeout)
	}
}
