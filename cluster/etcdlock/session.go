package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// session is one lease and the loop that keeps it alive (a lease.Session
// with etcd's renewal). Every key an acquisition writes is bound to the
// lease, so that it goes away with the process that wrote it. A session
// that ended (lease lost, or closed) stays ended; the backend opens a new
// one for later acquisitions.
type session struct {
	c    *clientv3.Client
	o    *options
	id   clientv3.LeaseID
	hexd string // the lease id in hex, the first part of every key id

	seq  atomic.Uint64           // numbers the keys of this session
	ls   *lease.Session[heldKey] // the deadline and the holds to tell when it ends
	done <-chan struct{}         // ls.Done()
	wg   sync.WaitGroup          // renewal requests still out
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
	s := &session{c: c, o: o, id: resp.ID, hexd: strconv.FormatInt(int64(resp.ID), 16)}
	s.ls = lease.NewSession[heldKey](s.deadline(sent, resp.TTL), lease.SessionConfig{
		Logger: o.log, Subject: "etcd lease", Attr: slog.String("lease", s.hexd), TTL: time.Duration(resp.TTL) * time.Second,
		Expired: fmt.Errorf("lease %x not renewed before its deadline", int64(s.id)),
		Renewal: lease.Renewal{
			Renew: s.renewOnce, First: time.Now().Add(o.renewal), Every: o.renewal,
			Timeout: o.requestTimeout, RetryFloor: 50 * time.Millisecond,
		},
	})
	s.done = s.ls.Done()
	return s, nil
}

// deadline is when a lease renewed by a request sent at sent, for ttl
// seconds, can no longer be trusted. The server counts the TTL from when it
// received the request, which is later than sent.
func (s *session) deadline(sent time.Time, ttl int64) time.Time {
	return sent.Add(time.Duration(ttl)*time.Second - s.o.drift)
}

// renewOnce is the session's lease.Renewer.
func (s *session) renewOnce(ctx context.Context, deadline time.Time) (time.Time, error) {
	sent, resp, err := s.renew(ctx, deadline)
	switch {
	case err == nil:
		return s.deadline(sent, resp.TTL), nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return time.Time{}, lease.Gone(fmt.Errorf("lease %x expired or revoked", int64(s.id)))
	}
	return time.Time{}, err
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

// ended returns why the session ended, or nil while it is alive.
func (s *session) ended() error { return s.ls.Err() }

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
func (s *session) track(l *driver.Loss, key string, rev int64) { s.ls.Track(l, heldKey{key, rev}) }

// removed fires the loss of the holds whose keys, under dir, a delete at
// revision rev took away: keys created before rev. It lets a Remove made
// through this backend return after its own holders know. The losses fire
// under the session's lock, so that a hold being passed (pass) is found
// under its new loss or refuses to pass.
func (s *session) removed(dir string, rev int64) {
	s.ls.FireIf(func(k heldKey) bool { return k.rev < rev && strings.HasPrefix(k.key, dir) }, errRemoved)
}

// pass moves the tracking of a hold from loss from to loss to, for a hold
// passed to another handle; it reports false, changing nothing, when the
// session has ended, from is not tracked, or less than a renewal period is
// left before the lease's deadline (renewals are failing: the hold goes
// back to the server rather than to another holder).
func (s *session) pass(from, to *driver.Loss) bool { return s.ls.Pass(from, to, s.o.renewal) }

func (s *session) untrack(l *driver.Loss) { s.ls.Untrack(l) }

// newID returns a key id unique among all sessions: the lease id and a
// sequence number.
func (s *session) newID() string {
	return s.hexd + "-" + strconv.FormatUint(s.seq.Add(1), 16)
}

// close ends the session and revokes its lease, which deletes every key
// bound to it.
func (s *session) close(ctx context.Context) error {
	alive := s.ended() == nil
	s.ls.End(baton.ErrClosed)
	s.ls.Wait()
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
func (s *session) leaseGone() { s.ls.End(fmt.Errorf("lease %x not found", int64(s.id))) }
