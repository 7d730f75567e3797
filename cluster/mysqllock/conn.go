package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strconv"
	"time"

	"github.com/batonlock/baton"
)

// The connection of a Mutex handle: one per handle, kept while the handle
// is open, with its statements prepared once.

// conn returns the handle's connection, opening one when there is none or
// the one there was closed by the server while idle.
func (m *mutex) getConn(ctx context.Context) (*sql.Conn, error) {
	m.mu.Lock()
	c, idle := m.conn, time.Since(m.lastUsed)
	m.mu.Unlock()
	if c != nil && idle > 500*time.Millisecond {
		// The server ends sessions idle longer than the lease TTL: have
		// the driver check the socket before its next write, so that a
		// closed connection fails before the statement is sent.
		err := c.Raw(func(dc any) error {
			if r, ok := dc.(driver.SessionResetter); ok {
				return r.ResetSession(ctx)
			}
			return nil
		})
		if err != nil {
			m.dropConn(c)
			c = nil
		}
	}
	if c != nil {
		return c, nil
	}
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		c.Close()
		return nil, baton.ErrClosed
	}
	m.conn, m.lastUsed = c, time.Now()
	return c, nil
}

func (m *mutex) used() {
	m.mu.Lock()
	m.lastUsed = time.Now()
	m.mu.Unlock()
}

// exec runs q on c as a statement prepared once per connection: with
// arguments, go-sql-driver otherwise prepares and closes a statement for
// every call (unless the DSN sets interpolateParams), a round trip more.
func (m *mutex) exec(ctx context.Context, c *sql.Conn, q string, args ...any) (sql.Result, error) {
	st, err := m.prepared(ctx, c, q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (m *mutex) prepared(ctx context.Context, c *sql.Conn, q string) (*sql.Stmt, error) {
	m.mu.Lock()
	if m.conn == c && m.stmts != nil {
		if st := m.stmts[q]; st != nil {
			m.mu.Unlock()
			return st, nil
		}
	}
	m.mu.Unlock()
	st, err := c.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn == c {
		if m.stmts == nil {
			m.stmts = make(map[string]*sql.Stmt)
		}
		if old := m.stmts[q]; old != nil {
			old.Close()
		}
		m.stmts[q] = st
	}
	return st, nil
}

// forget closes the statements of the handle's connection; mu is held.
func (m *mutex) forget() {
	for _, st := range m.stmts {
		st.Close()
	}
	m.stmts = nil
}

// dropConn discards c: the server ends its session, and with it any
// user-level lock it held.
func (m *mutex) dropConn(c *sql.Conn) {
	m.mu.Lock()
	if m.conn == c {
		m.forget()
		m.conn = nil
	}
	m.mu.Unlock()
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}

// closeConn gives the handle's connection back to the pool, with the
// server's own idle timeout again.
func (m *mutex) closeConn() {
	m.mu.Lock()
	c := m.conn
	m.forget()
	m.conn, m.closed = nil, true
	m.mu.Unlock()
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.b.c.RequestTimeout)
	defer cancel()
	if _, err := c.ExecContext(ctx, `SET SESSION wait_timeout = @@GLOBAL.wait_timeout`); err != nil {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = c.Close()
}
