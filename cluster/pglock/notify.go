package pglock

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// channel is the NOTIFY channel of every backend. Payloads: "c/<id>" wakes
// the Cond waiter of registration id, "s/<name>" the semaphore waiters of
// a name.
const channel = "baton"

// listener is one LISTEN connection per Backend, which hands notifications
// to the goroutines waiting for them in this process: waiters would
// otherwise need a connection each. It runs from the first need until
// Close, and reconnects when its connection fails; waiters check again at a
// backstop period, so a notification lost meanwhile delays them only.
type listener struct {
	b *backend

	mu      sync.Mutex
	subs    map[string]map[chan struct{}]struct{} // guarded by mu
	early   map[string]time.Time                  // guarded by mu: Cond wake-ups that came before their waiter registered
	running bool                                  // guarded by mu
	ready   chan struct{}                         // guarded by mu: closed once LISTEN took effect
	err     error                                 // guarded by mu: why the last connection failed
	stop    context.CancelFunc                    // guarded by mu
	closed  bool                                  // guarded by mu
	done    chan struct{}                         // guarded by mu: closed when run returns
}

func newListener(b *backend) *listener {
	return &listener{b: b, subs: map[string]map[chan struct{}]struct{}{}, early: map[string]time.Time{}}
}

// ensure starts the listener if it is not running, and waits until it
// listens.
func (l *listener) ensure(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return context.Canceled
	}
	if !l.running {
		l.running = true
		l.ready = make(chan struct{})
		l.done = make(chan struct{})
		rctx, cancel := context.WithCancel(context.Background())
		l.stop = cancel
		go l.run(rctx, l.ready, l.done)
	}
	ready := l.ready
	l.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// subscribe registers ch for payload; ch (buffered, 1) gets a value per
// notification, dropped when one is already pending. It reports whether a
// notification for payload came before (Cond registrations only).
func (l *listener) subscribe(payload string, ch chan struct{}) (early bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.early[payload]; ok {
		delete(l.early, payload)
		return true
	}
	m := l.subs[payload]
	if m == nil {
		m = map[chan struct{}]struct{}{}
		l.subs[payload] = m
	}
	m[ch] = struct{}{}
	return false
}

func (l *listener) unsubscribe(payload string, ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.subs[payload]; m != nil {
		delete(m, ch)
		if len(m) == 0 {
			delete(l.subs, payload)
		}
	}
}

func (l *listener) deliver(payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.subs[payload]
	if len(m) == 0 {
		if len(payload) > 2 && payload[:2] == "c/" {
			// The waiter of this registration may be about to subscribe.
			now := time.Now()
			if len(l.early) > 4096 {
				for k, t := range l.early {
					if now.Sub(t) > time.Minute {
						delete(l.early, k)
					}
				}
			}
			l.early[payload] = now
		}
		return
	}
	for ch := range m {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// run keeps a LISTEN connection until ctx ends.
func (l *listener) run(ctx context.Context, ready, done chan struct{}) {
	defer close(done)
	var readyOnce sync.Once
	for wait := 50 * time.Millisecond; ctx.Err() == nil; wait = min(2*wait, time.Second) {
		conn, err := pgx.ConnectConfig(ctx, l.b.pool.Config().ConnConfig.Copy())
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.b.o.Prefix + channel}.Sanitize())
			if err == nil {
				readyOnce.Do(func() { close(ready) })
				wait = 50 * time.Millisecond
				// Waiters check again: they may have missed notifications
				// while there was no connection.
				l.wakeAll()
				for {
					n, werr := conn.WaitForNotification(ctx)
					if werr != nil {
						err = werr
						break
					}
					l.deliver(n.Payload)
				}
			}
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(cctx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		l.b.o.Logger.Warn("baton: postgres notification connection failed; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (l *listener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.subs {
		for ch := range m {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	stop, done := l.stop, l.done
	l.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}
