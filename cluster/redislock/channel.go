package redislock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/driver"
	"github.com/redis/go-redis/v9"
)

// Channels (baton.Channel) on Redis.
//
// A channel is a list of messages and a hash of its parameters (capacity,
// largest message, closed) on one hash tag, so every script runs on one
// Cluster slot. A send is one script that checks the list's length against
// the capacity and appends all of a batch or as many as fit; a receive is
// one script that pops up to a batch from the head. Neither blocks on the
// server: a call that finds the channel full (empty) subscribes to the
// senders' (receivers') wake-up channel, tries again, and sleeps until a
// message there, which a take from a full list (an append to an empty
// list, a CloseSend) publishes. So nothing is taken or sent on
// cancellation, and waiting costs no pooled connection (the Backend's one
// Pub/Sub connection of Values carries it; a handle stays subscribed after
// its first wait, until Close). A Pub/Sub connection that
// breaks and is made again wakes every waiter, in case a message was lost
// meanwhile: no timer is needed.
//
// What it keeps: the channel lasts until removed (baton rm, Remove), its
// closed flag too; it has no expiry. Order per sender and each message to
// one receiver hold as for the same-host ring, since every push and pop is
// one script on one master.
//
// What a failure can lose: Redis replicates asynchronously, so a master that
// fails over (Sentinel, Cluster) can lose the sends it acknowledged last
// (receivers never get them) and give again messages it had handed out (a
// receiver gets one twice); a restart without persistence or a FLUSHALL
// loses the channel, and its handles then fail with baton.ErrLost. With
// WithReplicas(n), each send and receive waits (WAIT) for n replicas in
// the same round trip: a send not acknowledged in time returns
// ErrNotReplicated with the count it sent on the master (they may or may
// not survive a failover; they are not taken back), and a receive returns
// what it took whatever the replicas said (after a failover to a replica
// that missed it, those messages can be received again). A reply lost on
// the way (a broken connection, a master killed after it ran the request)
// loses nothing and sends nothing twice: requests carry ids
// (channel_receipts.go). A receiver that dies with a reply in flight, or
// whose handle is not closed after a failed receive, loses what that reply
// carried.
//
// SendFunc and RecvInto copy (there is no shared memory to write into). A
// SendBatch that does not fit one request (chanBatchMessages messages or
// chanBatchBytes bytes) goes as several, with no wait in between; a
// RecvBatch takes at most that many in one request.
//
// A one-to-one channel (baton.ChannelOptions.OneToOne) is recorded in the
// hash, so that its openers agree on it, and is otherwise served as any
// other: a script per call costs the same for one sender as for many, so
// the ends are not held and a second sender or receiver is not refused.

const kchan = "chan"

// Bounds of one request, so that a batch of large messages does not make
// a reply of gigabytes.
const (
	chanBatchMessages = 1024
	chanBatchBytes    = 8 << 20
)

var (
	scriptChanOpen    = loadScript("chan_open")
	scriptChanSend    = loadScript("chan_send")
	scriptChanRecv    = loadScript("chan_recv")
	scriptChanClose   = loadScript("chan_close")
	scriptChanRemove  = loadScript("chan_remove")
	scriptChanRelease = loadScript("chan_release")
	scriptChanInspect = loadScript("chan_inspect")
)

var errChanGone = fmt.Errorf("%w: the channel was removed, or lost by the server", baton.ErrLost)

var _ driver.ChannelOpener = (*backend)(nil)

// chanKeys are a channel's keys (chan_common.lua) and wake-up channels.
type chanKeys struct {
	keys         []string // list, hash
	rwake, swake string   // where receivers and senders wait
}

func newChanKeys(prefix, name string) chanKeys {
	base := redisnode.KeyBase(prefix, kchan, name)
	return chanKeys{keys: []string{base + "list", base + "info"}, rwake: base + "rwake", swake: base + "swake"}
}

// chanDriver serves one Channel handle.
type chanDriver struct {
	d        *backend
	k        chanKeys
	rk       []string // k's keys and the receipts' (channel_receipts.go)
	r        *receipts
	capacity int
	maxMsg   int
	one      bool          // one-to-one: recorded, not enforced (baton.ChannelOptions)
	stop     chan struct{} // closed by Interrupt
	once     sync.Once
	bufs     sync.Pool // of *[]byte of maxMsg bytes, for SendFunc

	mu     sync.Mutex
	idle   map[string][]*chanSub // guarded by mu: subscriptions between waits, by wake-up channel
	closed bool                  // guarded by mu
}

// chanSub is one waiter's subscription to a wake-up channel. A handle keeps
// it after the wait, until Close, so that its next wait costs no SUBSCRIBE
// and UNSUBSCRIBE: it stays subscribed all along (and woken when the
// connection is made again), so a try after taking it is still one that
// any later change wakes. A message left from before is a spurious wake.
type chanSub struct {
	wake  <-chan struct{}
	leave func()
}

func (c *chanDriver) Options() (int, int, bool) { return c.capacity, c.maxMsg, c.one }

// eval runs one of the channel's scripts. The request is not cancelled
// with ctx: a push or pop the server ran must be reported, or a message
// would be sent while the caller is told otherwise, or taken and lost
// (the client's timeouts still bound it). With WithReplicas it waits for
// the replicas; acked reports whether they acknowledged.
func (c *chanDriver) eval(ctx context.Context, s *redis.Script, keys []string, args ...any) (any, bool, error) {
	ctx = context.WithoutCancel(ctx)
	if c.d.o.rep.replicas == 0 {
		v, err := s.Run(ctx, c.d.c, keys, args...).Result()
		return v, true, err
	}
	return c.d.run(ctx, s, keys, args...)
}

// wait runs try until it reports done, sleeping between tries on the
// wake-up channel ch. A handle that has not waited yet makes its first try
// before subscribing, so that a call that need not wait costs one round
// trip.
func (c *chanDriver) wait(ctx context.Context, ch string, block bool, try func() (bool, error)) error {
	sub := c.kept(ch)
	if sub == nil {
		if done, err := try(); done || err != nil || !block {
			return err
		}
		var err error
		if sub, err = c.subscribe(ctx, ch); err != nil {
			return err
		}
	}
	defer c.unsubscribe(ch, sub)
	for {
		// Subscribed before this try: a change after it wakes us.
		if done, err := try(); done || err != nil || !block {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.stop:
			return errClosed
		case <-sub.wake:
		}
	}
}

// kept returns a subscription to ch the handle kept, or nil.
func (c *chanDriver) kept(ch string) *chanSub {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.idle[ch]
	if len(l) == 0 {
		return nil
	}
	c.idle[ch] = l[:len(l)-1]
	return l[len(l)-1]
}

// subscribe returns a new subscription to ch.
func (c *chanDriver) subscribe(ctx context.Context, ch string) (*chanSub, error) {
	vs, err := c.d.valueSubs()
	if err != nil {
		return nil, err
	}
	wake, leave, err := vs.join(ctx, ch)
	if err != nil {
		return nil, err
	}
	return &chanSub{wake: wake, leave: leave}, nil
}

// unsubscribe keeps sub for the handle's next wait, or ends it once the
// handle is closed.
func (c *chanDriver) unsubscribe(ch string, sub *chanSub) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		sub.leave()
		return
	}
	if c.idle == nil {
		c.idle = map[string][]*chanSub{}
	}
	c.idle[ch] = append(c.idle[ch], sub)
}

func (c *chanDriver) Send(ctx context.Context, msgs [][]byte, block bool) (int, error) {
	sent := 0
	var sendErr error
	err := c.wait(ctx, c.k.swake, block, func() (bool, error) {
		n, err := c.sendChunk(ctx, msgs)
		sent += n
		return n > 0, err
	})
	if err != nil || sent == 0 {
		if err == nil {
			err = baton.ErrChannelFull
		}
		return sent, err
	}
	// The rest of a batch larger than one request, as long as it fits.
	for sent < len(msgs) && sendErr == nil {
		var n int
		n, sendErr = c.sendChunk(ctx, msgs[sent:])
		if n == 0 {
			break
		}
		sent += n
	}
	if errors.Is(sendErr, ErrNotReplicated) {
		return sent, sendErr
	}
	return sent, nil // the later chunks' other errors: the caller sends the rest
}

// sendChunk sends the first messages of msgs that fit in one request, as
// many as there is room for. It returns how many it sent.
func (c *chanDriver) sendChunk(ctx context.Context, msgs [][]byte) (int, error) {
	id := c.r.next()
	args := make([]any, 0, 4+chanForgetMax+min(len(msgs), chanBatchMessages))
	args = append(args, c.k.rwake, id, chanReceiptTTL.Milliseconds())
	args, done := c.r.take(args, &c.r.done, true)
	first, size := len(args), 0
	for _, m := range msgs {
		if len(args) > first && (len(args)-first >= chanBatchMessages || size+len(m) > chanBatchBytes) {
			break
		}
		args = append(args, m)
		size += len(m)
	}
	v, acked, err := c.eval(ctx, scriptChanSend, c.rk, args...)
	n, _ := v.(int64)
	c.r.settled(id, n > 0, err, false)
	if err != nil {
		c.r.giveBack(&c.r.done, done)
		return 0, err
	}
	switch {
	case n == -1:
		return 0, baton.ErrChannelClosed
	case n == -2:
		return 0, errChanGone
	case n < 0 || int(n) > len(args)-first:
		return 0, fmt.Errorf("chan_send replied %v", v)
	case !acked && n > 0:
		return int(n), c.d.notReplicatedSend()
	}
	return int(n), nil
}

func (c *chanDriver) SendFunc(ctx context.Context, block bool, fill func(buf []byte) (int, error)) error {
	bp, _ := c.bufs.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, c.maxMsg)
		bp = &b
	}
	defer c.bufs.Put(bp)
	n, err := fill(*bp)
	if err != nil {
		return err
	}
	_, err = c.Send(ctx, [][]byte{(*bp)[:n]}, block)
	return err
}

func (c *chanDriver) Recv(ctx context.Context, max int, block bool, take func(msg []byte)) (int, error) {
	max = min(max, chanBatchMessages, chanBatchBytes/c.maxMsg+1)
	got := 0
	err := c.wait(ctx, c.k.rwake, block, func() (bool, error) {
		id := c.r.next()
		args := []any{c.k.swake, max, id, chanReceiptTTL.Milliseconds()}
		args, lost := c.r.take(args, &c.r.lost, true)
		args, done := c.r.take(args, &c.r.done, false)
		v, _, err := c.eval(ctx, scriptChanRecv, c.rk, args...)
		ms, _ := v.([]any)
		c.r.settled(id, len(ms) > 0, err, true)
		if err != nil {
			c.r.giveBack(&c.r.lost, lost)
			c.r.giveBack(&c.r.done, done)
			return false, err
		}
		switch r := v.(type) {
		case int64:
			if r == -1 {
				return false, baton.ErrChannelClosed
			}
			if r == -2 {
				return false, errChanGone
			}
		case []any:
			for _, m := range r {
				s, ok := m.(string)
				if !ok {
					return false, fmt.Errorf("chan_recv replied %T", m)
				}
				// A view of the reply, copied by take.
				take(unsafe.Slice(unsafe.StringData(s), len(s)))
				got++
			}
			return got > 0, nil
		}
		return false, fmt.Errorf("chan_recv replied %v", v)
	})
	if err == nil && got == 0 {
		err = baton.ErrChannelEmpty
	}
	return got, err
}

func (c *chanDriver) CloseSend(ctx context.Context) error {
	v, _, err := c.eval(ctx, scriptChanClose, c.k.keys, c.k.rwake, c.k.swake)
	if err != nil {
		return err
	}
	if v == int64(-2) {
		return errChanGone
	}
	return nil
}

func (c *chanDriver) Interrupt() { c.once.Do(func() { close(c.stop) }) }

func (c *chanDriver) Close() error {
	c.releaseReceipts()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, l := range c.idle {
		for _, sub := range l {
			sub.leave()
		}
	}
	c.idle = nil
	return nil
}

// notReplicatedSend is the error of a send the replicas did not
// acknowledge in time: the messages are on the master, not taken back.
func (d *backend) notReplicatedSend() error {
	return fmt.Errorf("%w (%d wanted within %d ms); the messages were sent on the master and may be lost in a failover", ErrNotReplicated, d.o.rep.replicas, d.o.rep.waitMS)
}

// inspectChannel describes a channel (baton status, ls): its capacity, and
// in Detail the messages it holds, their largest size and the closed flag.
// Waiters are not counted (-1).
func (d *backend) inspectChannel(ctx context.Context, name string) (baton.Info, error) {
	k := newChanKeys(d.o.Prefix, name)
	v, err := scriptChanInspect.Run(ctx, d.c, k.keys).Slice()
	if err != nil {
		return baton.Info{}, fmt.Errorf("redislock: inspect channel %q: %w", name, err)
	}
	if len(v) != 4 {
		return baton.Info{}, fmt.Errorf("redislock: channel %q: %w", name, fs.ErrNotExist)
	}
	in := baton.Info{Name: name, Kind: baton.KindChannel, Backend: d.Kind(), Impl: "lua", Holders: []baton.Holder{},
		Waiters: -1, Capacity: toInt(v[0])}
	in.Detail = fmt.Sprintf("%d of %d messages, up to %d bytes each", toInt(v[3]), in.Capacity, toInt(v[1]))
	if v[2] == "1" {
		in.Detail += ", closed"
	}
	return in, nil
}

// removeChannel deletes a channel and its messages; its waiting handles
// wake and, like every later call of its handles, fail with baton.ErrLost.
func (d *backend) removeChannel(ctx context.Context, name string) error {
	k := newChanKeys(d.o.Prefix, name)
	n, err := scriptChanRemove.Run(ctx, d.c, k.keys, k.rwake, k.swake).Int64()
	if err != nil {
		return fmt.Errorf("redislock: remove channel %q: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("redislock: channel %q: %w", name, fs.ErrNotExist)
	}
	return nil
}
