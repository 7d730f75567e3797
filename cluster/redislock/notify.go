package redislock

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifier receives the wake-up messages of one Backend on one Pub/Sub
// connection and routes them to waiting handles by id. A message is
// "id|token". The subscription starts with the first waiter.
type notifier struct {
	c       redis.UniversalClient
	channel string
	log     *slog.Logger

	mu      sync.Mutex
	ps      *redis.PubSub         // guarded by mu; nil until started
	waiters map[string]chan int64 // guarded by mu: id -> buffered(1) token
	closed  bool                  // guarded by mu
	done    chan struct{}         // closed when the reader goroutine ends
}

func newNotifier(c redis.UniversalClient, channel string, log *slog.Logger) *notifier {
	return &notifier{c: c, channel: channel, log: log, waiters: make(map[string]chan int64)}
}

// start subscribes once. It returns when the server confirmed the
// subscription, so that a message published after start returned is
// delivered.
func (n *notifier) start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errClosed
	}
	if n.ps != nil {
		return nil
	}
	ps := n.c.Subscribe(ctx, n.channel)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		// The subscription is the first request a Lock makes: its failure
		// (a refused password, an unreachable server) is the Lock's own.
		return ctxErr(ctx, err)
	}
	n.ps = ps
	n.done = make(chan struct{})
	go n.read(ps)
	return nil
}

// quietPing is how long the connection may be silent before the notifier
// pings it, as go-redis' PubSub.Channel does: a ping that fails makes the
// client connect and subscribe again.
const quietPing = 3 * time.Second

// read routes the messages of ps until ps is closed. It reads the
// connection itself, rather than through ps.Channel, whose reader hands
// each message to another goroutine and wakes a third to note that the
// connection is alive: two goroutine switches more between a release and
// the waiter it hands the lock to. Its own pings (checkQuiet) read a clock
// that the reader sets, and wake nobody per message.
func (n *notifier) read(ps *redis.PubSub) {
	defer close(n.done)
	var last atomic.Int64 // unix ns of the last reply read
	last.Store(time.Now().UnixNano())
	stop := make(chan struct{})
	defer close(stop)
	go checkQuiet(ps, &last, stop)
	ctx := context.Background()
	for fails := 0; ; {
		msg, err := ps.Receive(ctx)
		if err != nil {
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			// The client connects again at the next Receive; pause
			// when that fails too, as Channel does.
			if fails++; fails > 1 {
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		fails = 0
		last.Store(time.Now().UnixNano())
		if m, ok := msg.(*redis.Message); ok {
			n.route(m.Payload)
		}
	}
}

// checkQuiet pings ps whenever no reply came for quietPing, until stop is
// closed.
func checkQuiet(ps *redis.PubSub, last *atomic.Int64, stop <-chan struct{}) {
	t := time.NewTicker(quietPing)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, last.Load())) < quietPing {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), quietPing)
		_ = ps.Ping(ctx)
		cancel()
	}
}

// route hands the token of a message "id|token" to the waiter id.
func (n *notifier) route(payload string) {
	id, t, ok := strings.Cut(payload, "|")
	tok, err := strconv.ParseInt(t, 10, 64)
	if !ok || err != nil {
		return
	}
	// Sent under mu, so that no message reaches a channel after
	// unregister returned: a handle reuses its channel for its next
	// acquisition.
	n.mu.Lock()
	if w := n.waiters[id]; w != nil {
		select {
		case w <- tok:
		default:
		}
	}
	n.mu.Unlock()
}

// register routes id's wake-up to w (buffered, 1), after emptying it.
func (n *notifier) register(id string, w chan int64) {
	select {
	case <-w:
	default:
	}
	n.mu.Lock()
	n.waiters[id] = w
	n.mu.Unlock()
}

func (n *notifier) unregister(id string) {
	n.mu.Lock()
	delete(n.waiters, id)
	n.mu.Unlock()
}

func (n *notifier) close() error {
	n.mu.Lock()
	n.closed = true
	ps, done := n.ps, n.done
	n.ps = nil
	n.mu.Unlock()
	return closeReader(ps, done)
}

// closeReader closes ps, if there is one, and waits for its reader to end
// (done closed).
func closeReader(ps *redis.PubSub, done <-chan struct{}) error {
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}
