package redislock

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// valueSubs is one Pub/Sub connection per Backend that carries the write
// announcements of the values its handles wait on: one subscription per
// channel with a waiter, shared by that channel's waiters. It is apart from
// the notifier, whose messages go to one waiter by id.
type valueSubs struct {
	c redis.UniversalClient

	mu     sync.Mutex
	ps     *redis.PubSub        // guarded by mu; nil until the first join
	subs   map[string]*valueSub // guarded by mu: channel -> its waiters
	acks   map[string]*subAcks  // guarded by mu: channel -> subscriptions sent and confirmed
	closed bool                 // guarded by mu
	done   chan struct{}        // closed when the reader ends
}

type valueSub struct {
	waiters map[chan struct{}]struct{}
	sent    uint64        // acks.sent once our SUBSCRIBE was sent
	ready   chan struct{} // closed once the server confirmed it
}

// subAcks counts a channel's SUBSCRIBE commands and the server's
// confirmations, so that a late confirmation of an earlier subscription
// (given up before it came) is not taken for the current one's.
type subAcks struct{ sent, acked uint64 }

func newValueSubs(c redis.UniversalClient) *valueSubs {
	return &valueSubs{c: c, subs: map[string]*valueSub{}, acks: map[string]*subAcks{}}
}

// join adds a waiter to channel and returns once the server has confirmed
// the subscription: a message published after join returned reaches wake.
func (s *valueSubs) join(ctx context.Context, channel string) (wake <-chan struct{}, leave func(), err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, errClosed
	}
	if s.ps == nil {
		s.ps = s.c.Subscribe(context.WithoutCancel(ctx))
		s.done = make(chan struct{})
		go s.read(s.ps.ChannelWithSubscriptions())
	}
	sub := s.subs[channel]
	if sub == nil {
		a := s.acks[channel]
		if a == nil {
			a = &subAcks{}
			s.acks[channel] = a
		}
		a.sent++
		sub = &valueSub{waiters: map[chan struct{}]struct{}{}, sent: a.sent, ready: make(chan struct{})}
		s.subs[channel] = sub
		if err := s.ps.Subscribe(context.WithoutCancel(ctx), channel); err != nil {
			// No confirmation will come for it; and go-redis, which
			// keeps the channel to subscribe again on a new connection,
			// must forget it.
			a.sent--
			delete(s.subs, channel)
			_ = s.ps.Unsubscribe(context.WithoutCancel(ctx), channel)
			s.mu.Unlock()
			return nil, nil, fmt.Errorf("subscribe to %s: %w", channel, err)
		}
	}
	w := make(chan struct{}, 1)
	sub.waiters[w] = struct{}{}
	s.mu.Unlock()
	leave = func() { s.leave(channel, sub, w) }
	select {
	case <-sub.ready:
		return w, leave, nil
	case <-ctx.Done():
		leave()
		return nil, nil, ctx.Err()
	}
}

func (s *valueSubs) leave(channel string, sub *valueSub, w chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(sub.waiters, w)
	if len(sub.waiters) > 0 || s.subs[channel] != sub {
		return
	}
	delete(s.subs, channel)
	if a := s.acks[channel]; a != nil && a.acked >= a.sent {
		delete(s.acks, channel)
	}
	if !s.closed {
		_ = s.ps.Unsubscribe(context.Background(), channel)
	}
}

func (s *valueSubs) read(ch <-chan any) {
	defer close(s.done)
	for m := range ch {
		s.mu.Lock()
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				break
			}
			a := s.acks[m.Channel]
			if a == nil {
				break
			}
			// Reconnections confirm again what was confirmed before.
			a.acked = min(a.acked+1, a.sent)
			if sub := s.subs[m.Channel]; sub != nil && a.acked >= sub.sent {
				select {
				case <-sub.ready:
					// Subscribed again on a new connection: a message may
					// have been lost meanwhile, so the waiters look again.
					wakeAll(sub)
				default:
					close(sub.ready)
				}
			}
			if s.subs[m.Channel] == nil && a.acked >= a.sent {
				delete(s.acks, m.Channel)
			}
		case *redis.Message:
			if sub := s.subs[m.Channel]; sub != nil {
				wakeAll(sub)
			}
		}
		s.mu.Unlock()
	}
}

func (s *valueSubs) close() error {
	s.mu.Lock()
	s.closed = true
	ps, done := s.ps, s.done
	s.mu.Unlock()
	return closeReader(ps, done)
}

// wakeAll wakes every waiter of sub that is not already woken.
func wakeAll(sub *valueSub) {
	for w := range sub.waiters {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}
