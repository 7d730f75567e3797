package etcdlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/batch"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/driver"
)

// Key layout, under the prefix P (default "baton/"), with <n> the name with
// '%' and '/' percent-encoded so that one name's directory never contains
// another name's keys:
//
//	P mutex/<n>/q/<id>        one per acquisition, value: holder
//	P rwmutex/<n>/q/<id>      one per acquisition, value: holder with mode
//	P rwmutex/<n>/w/<id>      writers only, same create revision as q/<id>
//	P semaphore/<n>           capacity, no lease
//	P semaphore/<n>/q/<id>    one per acquisition, value: holder with permits
//	P cond/<n>/q/<id>         one per registered waiter
//
// <id> is the session's lease id and a sequence number, unique per key.

// backend is the BackendDriver; baton.NewBackend wraps it.
type backend struct {
	c      *clientv3.Client
	own    bool // c was dialled by OpenURL and is closed with the backend
	o      options
	host   string
	pid    int
	head   []byte         // the start of every holder value: holderHead(pid, host)
	bg     sync.WaitGroup // background cleanups
	bgStop context.CancelFunc
	bgCtx  context.Context

	slot     chan struct{}           // one goroutine at a time opens a session
	watchGen atomic.Uint64           // names the gRPC stream of waiters' watches (wait.go)
	cur      atomic.Pointer[session] // the current session, nil before the first
	watchMu  sync.Mutex
	dirs     map[string]*dirWatch     // guarded by watchMu: the watches of holds' directories (holdwatch.go)
	queues   batch.Shared[queueCalls] // by directory, of queues with open handles (queue_gather.go)
	closed   atomic.Bool
	closeMu  sync.Mutex // serialises Close
}

// New returns a Backend on an etcd client, with the options of package lease
// and those of this package (see options.go for what they do on etcd). The
// client stays the caller's: closing the Backend revokes its lease but does
// not close the client. No request is made until the first acquisition.
func New(client *clientv3.Client, opts ...lease.Option) (baton.Backend, error) {
	if client == nil {
		return nil, invalid("nil client")
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: %w", err)
	}
	return baton.NewBackend(newBackend(client, false, o)), nil
}

func newBackend(c *clientv3.Client, own bool, o options) *backend {
	host, _ := os.Hostname()
	ctx, cancel := context.WithCancel(context.Background())
	pid := os.Getpid()
	return &backend{
		c: c, own: own, o: o, host: host, pid: pid, head: holderHead(pid, host),
		bgCtx: ctx, bgStop: cancel,
		slot: make(chan struct{}, 1), dirs: map[string]*dirWatch{},
	}
}

func (b *backend) Kind() string { return "etcd" }

// ValidateName has nothing to add: encoded names are short enough for etcd.
func (b *backend) ValidateName(string) error { return nil }

// session returns the current session, opening a new one when there is none
// or the last one ended.
func (b *backend) session(ctx context.Context) (*session, error) {
	if s := b.cur.Load(); s != nil && s.ended() == nil {
		return s, nil
	}
	if b.closed.Load() {
		return nil, baton.ErrClosed
	}
	select {
	case b.slot <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("open session: %w", ctx.Err())
	}
	defer func() { <-b.slot }()
	if b.closed.Load() {
		return nil, baton.ErrClosed
	}
	if s := b.cur.Load(); s != nil && s.ended() == nil {
		return s, nil
	}
	s, err := newSession(ctx, b.c, &b.o)
	if err != nil {
		return nil, err
	}
	b.cur.Store(s)
	return s, nil
}

func (b *backend) Close() error {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed.Swap(true) {
		return nil
	}
	b.slot <- struct{}{} // wait for a session being opened; none opens from now on
	<-b.slot
	var errs []error
	if s := b.cur.Load(); s != nil {
		errs = append(errs, s.close(context.Background()))
	}
	b.bgStop()
	b.bg.Wait()
	if b.own {
		errs = append(errs, b.c.Close())
	}
	return errors.Join(errs...)
}

// rctx bounds one request by the request timeout.
func (b *backend) rctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.o.requestTimeout)
}

// dir returns the directory of a name of a kind, ending in '/'.
func (b *backend) dir(kind baton.Kind, name string) string {
	return b.o.prefix + string(kind) + "/" + encodeName(name) + "/"
}

var nameEncoder = strings.NewReplacer("%", "%25", "/", "%2F")
var nameDecoder = strings.NewReplacer("%25", "%", "%2F", "/")

func encodeName(name string) string { return nameEncoder.Replace(name) }
func decodeName(enc string) string  { return nameDecoder.Replace(enc) }

// holder is the value of an acquisition's key.
type holder struct {
	PID   int       `json:"pid,omitempty"`
	Host  string    `json:"host,omitempty"`
	Since time.Time `json:"since"`
	Mode  string    `json:"mode,omitempty"`
	N     int64     `json:"n,omitempty"`
	Claim string    `json:"claim,omitempty"` // a queue claim's id, unique to the claim
}

// holderValue is the JSON of a holder of the backend's process, as
// json.Marshal writes it, built by hand: every acquisition writes one, and
// only the time, mode and n change.
func (b *backend) holderValue(mode string, n int64) string {
	return b.holderValueAt(time.Now().UTC(), mode, n)
}

func (b *backend) holderValueAt(since time.Time, mode string, n int64) string {
	head := b.head
	if head == nil || !plainMode(mode) || since.Year() < 0 || since.Year() > 9999 {
		v, _ := json.Marshal(holder{PID: b.pid, Host: b.host, Since: since, Mode: mode, N: n})
		return string(v)
	}
	v := make([]byte, 0, len(head)+80)
	v = append(v, head...)
	v = append(v, `"since":"`...)
	v = since.AppendFormat(v, time.RFC3339Nano)
	v = append(v, '"')
	if mode != "" {
		v = append(v, `,"mode":"`...)
		v = append(v, mode...)
		v = append(v, '"')
	}
	if n != 0 {
		v = append(v, `,"n":`...)
		v = strconv.AppendInt(v, n, 10)
	}
	v = append(v, '}')
	return string(v)
}

// holderHead returns the JSON of a holder up to its time: the opening
// brace and the pid and host fields, each with the comma after it.
func holderHead(pid int, host string) []byte {
	v, _ := json.Marshal(struct {
		PID  int    `json:"pid,omitempty"`
		Host string `json:"host,omitempty"`
	}{pid, host})
	v = v[:len(v)-1] // the closing brace
	if len(v) > 1 {
		v = append(v, ',')
	}
	return v
}

// plainMode reports whether mode needs no escaping in JSON.
func plainMode(mode string) bool {
	for i := 0; i < len(mode); i++ {
		if c := mode[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// claimValue is the value of a queue's claim key, unique to the claim.
func (b *backend) claimValue(id string) string {
	v, _ := json.Marshal(holder{PID: b.pid, Host: b.host, Since: time.Now().UTC(), Mode: "exclusive", Claim: id})
	return string(v)
}

// guardKey names key for a clean-up that deletes it only while it has the
// value v (a claim key names a job, and this session may have claimed the
// job again since). Values are JSON, which has no NUL.
func guardKey(key, v string) string { return key + "\x00" + v }

func parseHolder(v []byte) holder {
	var h holder
	_ = json.Unmarshal(v, &h)
	return h
}

// cleanup deletes keys an acquisition may have written and no longer wants.
// It tries once, briefly, so that a cancelled call returns promptly; if that
// fails it goes on in the background until it succeeds or the session ends
// (then the lease takes the keys with it). It reports whether the keys are
// gone when it returns.
func (b *backend) cleanup(s *session, keys ...string) bool {
	if b.deleteKeys(b.bgCtx, s, keys, min(b.o.requestTimeout, 500*time.Millisecond)) {
		return true
	}
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		b.deleteLater(s, keys, 50*time.Millisecond)
	}()
	return false
}

// deleteKeys deletes keys in one request bounded by d, each only while it
// is bound to the lease of s (and has the value of a guardKey): a key may
// have been written again since, by another session or another claim of
// this one (a queue's claim key names the job, not the claim), and that
// key is not this clean-up's to delete.
func (b *backend) deleteKeys(ctx context.Context, s *session, keys []string, d time.Duration) bool {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		var cmps []clientv3.Cmp
		if j := strings.LastIndexByte(k, 0); j >= 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.Value(k[:j]), "=", k[j+1:]))
			k = k[:j]
		}
		cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(k), "=", s.id))
		ops[i] = clientv3.OpTxn(cmps, []clientv3.Op{clientv3.OpDelete(k)}, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err := b.c.Txn(ctx).Then(ops...).Commit()
	return err == nil
}

// deleteLater deletes keys after wait, and again with growing waits until a
// delete succeeds, the session ends or the backend closes.
func (b *backend) deleteLater(s *session, keys []string, wait time.Duration) {
	for ; ; wait = min(2*wait, time.Second) {
		select {
		case <-s.done:
			return
		case <-b.bgCtx.Done():
			return
		case <-time.After(wait):
		}
		if b.deleteKeys(b.bgCtx, s, keys, b.o.requestTimeout) {
			return
		}
	}
}

// forget deletes the keys of a write whose outcome is unknown: it failed,
// or timed out. A request the client gave up on may still be applied by the
// server after the delete, so the keys are deleted once more when the
// request timeout has passed again. Their id is never used again.
func (b *backend) forget(s *session, keys []string) {
	b.cleanup(s, keys...)
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		b.deleteLater(s, keys, b.o.requestTimeout)
	}()
}

// commit sends txn, which writes the keys of a new acquisition, and returns
// its response; on failure the keys are taken back.
//
// The request does not carry the caller's cancellation. A request that the
// client abandons may still be applied by the server, and it can be applied
// after a delete sent later, because the two travel on different streams:
// the acquisition's key would then stay, held by no one, for as long as the
// session lives, and block the name. So the request goes on on its own, the
// caller returns as soon as its context is done, and whoever is left when
// the answer comes deletes what was written. A context that only Close can
// end (driver.CloseOnly) is not worth a goroutine: the caller waits for the
// answer, a request timeout at most, and cleans up as after any write.
func (b *backend) commit(ctx context.Context, s *session, keys []string, txn func(context.Context) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
	// CloseOnly first: asking a cancelCtx for Done makes its channel.
	if driver.CloseOnly(ctx) || ctx.Done() == nil {
		rctx, cancel := b.rctx(context.WithoutCancel(ctx))
		resp, err := txn(rctx)
		cancel()
		if err != nil {
			b.forget(s, keys)
		}
		return resp, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type result struct {
		resp *clientv3.TxnResponse
		err  error
	}
	ch := make(chan result)
	gone := make(chan struct{})
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		rctx, cancel := b.rctx(context.WithoutCancel(ctx))
		resp, err := txn(rctx)
		cancel()
		select {
		case ch <- result{resp, err}:
		case <-gone:
			switch {
			case err != nil:
				b.forget(s, keys)
			case resp.Succeeded:
				b.cleanup(s, keys...)
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			b.forget(s, keys)
		}
		return r.resp, r.err
	case <-ctx.Done():
		close(gone)
		return nil, ctx.Err()
	}
}

// transient reports whether a failed request may succeed if tried again: the
// cluster has no leader for a moment, a member is unreachable, or the request
// timed out.
func transient(err error) bool {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		switch ee.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
			return true
		}
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// retry decides after a failed request of an acquisition on s: it ends s
// if the server no longer knows its lease, and returns nil when the
// acquisition should try again (after a backoff), else the error to
// return.
func retry(ctx context.Context, s *session, attempt int, err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.leaseGone()
	} else if ctx.Err() != nil || !transient(err) {
		return lease.CtxErr(ctx, err)
	}
	if berr := backoff(ctx, s, attempt); berr != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// again decides after a failed write of a new acquisition on s: a
// blocking one (wait) as retry does; a try is tried again only once, on a
// new session, when the server no longer knows the lease, and otherwise
// returns the error.
func again(ctx context.Context, s *session, wait bool, attempt int, err error) error {
	if wait {
		return retry(ctx, s, attempt, err)
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
		s.leaseGone()
		return nil
	}
	return lease.CtxErr(ctx, err)
}

// backoff waits before a retry; it returns an error when ctx is done or the
// session ended first.
func backoff(ctx context.Context, s *session, attempt int) error {
	d := min(time.Duration(attempt+1)*25*time.Millisecond, 500*time.Millisecond)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return s.lostErr()
	}
}

var (
	_ driver.Backend  = (*backend)(nil)
	_ baton.Inspector = (*backend)(nil)
)
