package redislock

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"

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
	ch := ps.Channel()
	go n.read(ch)
	return nil
}

func (n *notifier) read(ch <-chan *redis.Message) {
	defer close(n.done)
	for m := range ch {
		id, t, ok := strings.Cut(m.Payload, "|")
		tok, err := strconv.ParseInt(t, 10, 64)
		if !ok || err != nil {
			continue
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
