package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// session is one lease and the loop that keeps it alive. Every key an
// acquisition writes is bound to the lease, so that it goes away with the
// process that wrote it. A session that ended (lease lost, or closed) stays
// ended; the backend opens a new one for later acquisitions.
type session struct {
	c    *clientv3.Client
	o    *options
	id   clientv3.LeaseID
	hexd string // the lease id in hex, the first part of every key id

	seq  atomic.Uint64 // numbers the keys of this session
	stop context.CancelFunc
	done chan struct{} // closed when the session ends
	wg   sync.WaitGroup

	mu     sync.Mutex
	err    error                    // guarded by mu; why the session ended
	losses map[*driver.Loss]heldKey // guarded by mu; holds to tell when it ends
	dl     time.Time                // guarded by mu; the lease's local deadline, given to every loss
}

// newSession grants a lease and starts renewing it.
func newSession(ctx context.Context, c *clientv3.Client, o *options) (*session, error) {
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, o.requestTimeout)
	resp, err := c.Grant(rctx, int64(o.ttl/time.Second))
	cancel()
	if err != nil {
		return nil, lease.CtxErr(ctx, fmt.Errorf("grant lease: %w", err))
	}
	lctx, stop := context.WithCancel(context.Background())
	s := &session{
		c:      c,
		o:      o,
		id:     resp.ID,
		hexd:   strconv.FormatInt(int64(resp.ID), 16),
		stop:   stop,
		done:   make(chan struct{}),
		losses: make(map[*driver.Loss]heldKey),
	}
	s.dl = s.deadline(sent, resp.TTL)
	s.wg.Add(1)
	go s.keepAlive(lctx, s.dl)
	return s, nil
}

// deadline is when a lease renewed by a request sent at sent, for ttl
// seconds, can no longer be trusted. The server counts the TTL from when it
// received the request, which is later than sent.
func (s *session) deadline(sent time.Time, ttl int64) time.Time {
	return sent.Add(time.Duration(ttl)*time.Second - s.o.drift)
}

// keepAlive renews the lease every renewal period, and ends the session when
// the lease is gone or its deadline passes without a renewal.
func (s *session) keepAlive(ctx context.Context, deadline time.Time) {
	defer s.wg.Done()
	wait := s.o.renewal
	t := time.NewTimer(min(wait, time.Until(deadline)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !time.Now().Before(deadline) {
			s.lose(fmt.Errorf("lease %x not renewed before its deadline", int64(s.id)))
			return
		}
		sent, resp, err := s.renew(ctx, deadline)
		switch {
		case err == nil:
			s.o.log.Debug("baton: etcd lease renewed", "lease", s.hexd, "ttl", time.Duration(resp.TTL)*time.Second)
			deadline = s.deadline(sent, resp.TTL)
			s.setDeadline(deadline)
			wait = s.o.renewal
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.lose(fmt.Errorf("lease %x expired or revoked", int64(s.id)))
			return
		case ctx.Err() != nil:
			return
		default:
			s.o.log.Warn("baton: etcd lease renewal failed; retrying", "lease", s.hexd, "err", err, "deadline_in", time.Until(deadline))
			// Try again soon; the deadline check above ends the session
			// if no renewal gets through in time.
			wait = max(s.o.renewal/8, 50*time.Millisecond)
		}
		t.Reset(max(0, min(wait, time.Until(deadline))))
	}
}

// renew sends a renewal and, when no answer has come by half of what is
// left before deadline, a second one: the client sends each request to the
// next member, so a member that does not answer (paused, cut off) does not
// cost the lease, and a slow one still has all the time left. It returns
// the first answer with its request's send time, or an error when every
// request failed.
func (s *session) renew(ctx context.Context, deadline time.Time) (time.Time, *clientv3.LeaseKeepAliveResponse, error) {
	rctx, cancel := context.WithTimeout(ctx, min(time.Until(deadline), s.o.requestTimeout))
	defer cancel() // ends the request still out
	type answer struct {
		sent time.Time
		resp *clientv3.LeaseKeepAliveResponse
		err  error
	}
	answers := make(chan answer, 2)
	send := func() {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			sent := time.Now()
			resp, err := s.c.KeepAliveOnce(rctx, s.id)
			answers <- answer{sent, resp, err}
		}()
	}
	send()
	out := 1
	second := time.NewTimer(time.Until(deadline) / 2)
	defer second.Stop()
	for {
		select {
		case <-second.C:
			send()
			out++
		case a := <-answers:
			out--
			if a.err == nil || out == 0 || errors.Is(a.err, rpctypes.ErrLeaseNotFound) {
				return a.sent, a.resp, a.err
			}
		}
	}
}

// setDeadline moves the deadline of the lease and of every hold on it
// (a hold's Err and Lost compare it with the clock when read).
func (s *session) setDeadline(dl time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dl = dl
	for l := range s.losses {
		l.SetDeadline(dl)
	}
}

// lose ends the session on the loss of its lease.
func (s *session) lose(cause error) {
	s.o.log.Warn("baton: etcd lease lost", "err", cause)
	s.end(cause)
}

// end marks the session ended with cause and fires the loss of every hold.
func (s *session) end(cause error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = cause
	losses := s.losses
	s.losses = nil
	close(s.done)
	s.mu.Unlock()
	for l := range losses {
		l.Fire(cause)
	}
	s.stop()
}

// ended returns why the session ended, or nil while it is alive.
func (s *session) ended() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// lostErr is the error a caller gets when the session ended under it.
func (s *session) lostErr() error {
	err := s.ended()
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", baton.ErrLost, err)
}

// heldKey is the key of a tracked hold and its create revision.
type heldKey struct {
	key string
	rev int64
}

// track registers a hold's loss and key; the loss fires at once if the
// session has ended.
func (s *session) track(l *driver.Loss, key string, rev int64) {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		l.Fire(err)
		return
	}
	s.losses[l] = heldKey{key, rev}
	l.SetDeadline(s.dl)
	s.mu.Unlock()
}

// removed fires the loss of the holds whose keys, under dir, a delete at
// revision rev took away: keys created before rev. It lets a Remove made
// through this backend return after its own holders know.
// The losses fire under mu, so that a hold being passed (pass) is found
// under its new loss or refuses to pass.
func (s *session) removed(dir string, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l, k := range s.losses {
		if k.rev < rev && strings.HasPrefix(k.key, dir) {
			l.Fire(errRemoved)
		}
	}
}

// pass moves the tracking of a hold from loss from to loss to, for a hold
// passed to another handle; it reports false, changing nothing, when the
// session has ended, from is not tracked, or less than a renewal period is
// left before the lease's deadline (renewals are failing: the hold goes
// back to the server rather than to another holder).
func (s *session) pass(from, to *driver.Loss) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.losses[from]
	// removed fires a hold's loss under s.mu and leaves it tracked: a hold
	// it fired is not passed on, or its Unlock would report success.
	if s.err != nil || !ok || from.Err() != nil || time.Until(s.dl) < s.o.renewal {
		return false
	}
	delete(s.losses, from)
	s.losses[to] = k
	to.SetDeadline(s.dl)
	from.SetDeadline(time.Time{})
	return true
}

func (s *session) untrack(l *driver.Loss) {
	s.mu.Lock()
	delete(s.losses, l)
	s.mu.Unlock()
	l.SetDeadline(time.Time{})
}

// newID returns a key id unique among all sessions: the lease id and a
// sequence number.
func (s *session) newID() string {
	return s.hexd + "-" + strconv.FormatUint(s.seq.Add(1), 16)
}

// close ends the session and revokes its lease, which deletes every key
// bound to it.
func (s *session) close(ctx context.Context) error {
	alive := s.ended() == nil
	s.end(baton.ErrClosed)
	s.wg.Wait()
	if !alive {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, s.o.requestTimeout)
	defer cancel()
	if _, err := s.c.Revoke(rctx, s.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("revoke lease %x: %w", int64(s.id), err)
	}
	return nil
}

// ids hands out the key ids of one driver. A deleted key leaves a tombstone
// in etcd's index until the next compaction, and every read of a name's
// directory walks over them: a fresh key per acquisition would make each
// read slower with every acquisition. So a driver reuses the id of a key
// that it knows is deleted (a clean release, a confirmed delete); an id
// whose key may still exist, or may be deleted later in the background, is
// never handed out again. Ids of live keys are never shared, so every
// acquisition in flight has a key of its own.
type ids struct {
	mu   sync.Mutex
	s    *session // guarded by mu; the session the free ids belong to
	free []string // guarded by mu
}

func (p *ids) get(s *session) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.s == s && len(p.free) > 0 {
		id := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		return id
	}
	return s.newID()
}

// put returns the id of a key known to be deleted.
func (p *ids) put(s *session, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.s != s {
		p.s, p.free = s, p.free[:0]
	}
	p.free = append(p.free, id)
}

// leaseGone ends s, whose lease the server no longer knows.
func (s *session) leaseGone() { s.end(fmt.Errorf("lease %x not found", int64(s.id))) }
