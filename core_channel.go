package baton

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/batonlock/baton/driver"
)

// KindChannel names channels in errors and listings.
const KindChannel Kind = "channel"

// chanHandle is the core of a Channel handle: validation, ErrClosed, the
// size check of messages, error wrapping, and a Close that interrupts the
// calls in progress and waits for them before it closes the driver.
type chanHandle struct {
	b    *coreBackend
	name string
	d    driver.Channel
	opts ChannelOptions

	// mu is held for reading by every call while it uses d and for
	// writing by Close, so that d.Close comes after every call.
	mu     sync.RWMutex
	closed atomic.Bool
}

// errEOF is the end of a closed and drained channel for receivers.
var errEOF = fmt.Errorf("%w (%w)", ErrChannelClosed, io.EOF)

// validateChannelOptions checks o before any side effect.
func validateChannelOptions(o ChannelOptions) error {
	if o.Capacity < 0 || o.Capacity > MaxChannelCapacity {
		return fmt.Errorf("%w: channel capacity %d, must be 1 to %d (0: default)", ErrInvalidArgument, o.Capacity, MaxChannelCapacity)
	}
	if o.MaxMessage < 0 || o.MaxMessage > MaxChannelMessage {
		return fmt.Errorf("%w: largest message %d bytes, must be 1 to %d (0: default)", ErrInvalidArgument, o.MaxMessage, MaxChannelMessage)
	}
	return nil
}

func (b *coreBackend) Channel(ctx context.Context, name string, o ChannelOptions) (Channel, error) {
	c, err := b.openChannel(ctx, name, o)
	if err != nil {
		return nil, b.fail("open", KindChannel, name, err)
	}
	return c, nil
}

func (b *coreBackend) openChannel(ctx context.Context, name string, o ChannelOptions) (*chanHandle, error) {
	if err := validateChannelOptions(o); err != nil {
		return nil, err
	}
	if err := b.validate(ctx, name); err != nil {
		return nil, err
	}
	co, ok := b.d.(driver.ChannelOpener)
	if !ok {
		return nil, fmt.Errorf("%w: the %s backend has no channels", ErrUnsupported, b.kind)
	}
	d, err := co.OpenChannel(ctx, name, o.Capacity, o.MaxMessage, o.OneToOne)
	if err != nil {
		return nil, err
	}
	c := &chanHandle{b: b, name: name, d: d}
	c.opts.Capacity, c.opts.MaxMessage, c.opts.OneToOne = d.Options()
	if err := b.register(c); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *chanHandle) fail(op string, err error) error {
	return wrapErr(op, c.b.kind, KindChannel, c.name, err)
}

func (c *chanHandle) Name() string            { return c.name }
func (c *chanHandle) Options() ChannelOptions { return c.opts }

// enter starts a call: it returns with mu held for reading, or an error.
// A context already done fails every call alike, before the driver.
func (c *chanHandle) enter(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.RLock()
	if c.closed.Load() {
		c.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

// checkSize refuses a message larger than the channel's limit.
func (c *chanHandle) checkSize(msg []byte) error {
	if len(msg) > c.opts.MaxMessage {
		return fmt.Errorf("%w: message of %d bytes, more than the channel's limit of %d", ErrInvalidArgument, len(msg), c.opts.MaxMessage)
	}
	return nil
}

func (c *chanHandle) send(ctx context.Context, op string, msgs [][]byte, block bool) (int, error) {
	if len(msgs) == 0 {
		return 0, c.fail(op, fmt.Errorf("%w: no messages", ErrInvalidArgument))
	}
	for _, m := range msgs {
		if err := c.checkSize(m); err != nil {
			return 0, c.fail(op, err)
		}
	}
	if err := c.enter(ctx); err != nil {
		return 0, c.fail(op, err)
	}
	defer c.mu.RUnlock()
	n, err := c.d.Send(ctx, msgs, block)
	return n, c.fail(op, err)
}

func (c *chanHandle) Send(ctx context.Context, msg []byte) error {
	_, err := c.send(ctx, "send", [][]byte{msg}, true)
	return err
}

func (c *chanHandle) TrySend(ctx context.Context, msg []byte) error {
	_, err := c.send(ctx, "trysend", [][]byte{msg}, false)
	return err
}

func (c *chanHandle) SendBatch(ctx context.Context, msgs [][]byte) (int, error) {
	return c.send(ctx, "sendbatch", msgs, true)
}

func (c *chanHandle) SendFunc(ctx context.Context, fill func(buf []byte) (int, error)) error {
	if fill == nil {
		return c.fail("sendfunc", fmt.Errorf("%w: nil fill function", ErrInvalidArgument))
	}
	if err := c.enter(ctx); err != nil {
		return c.fail("sendfunc", err)
	}
	defer c.mu.RUnlock()
	max := c.opts.MaxMessage
	return c.fail("sendfunc", c.d.SendFunc(ctx, true, func(buf []byte) (int, error) {
		n, err := fill(buf[:max:max])
		if err == nil && (n < 0 || n > max) {
			err = fmt.Errorf("%w: fill wrote %d bytes, not 0 to %d", ErrInvalidArgument, n, max)
		}
		return n, err
	}))
}

func (c *chanHandle) recv(ctx context.Context, op string, max int, block bool, take func([]byte)) (int, error) {
	if err := c.enter(ctx); err != nil {
		return 0, c.fail(op, err)
	}
	defer c.mu.RUnlock()
	n, err := c.d.Recv(ctx, max, block, take)
	if errors.Is(err, ErrChannelClosed) {
		err = errEOF
	}
	return n, c.fail(op, err)
}

func (c *chanHandle) Recv(ctx context.Context) ([]byte, error) {
	var msg []byte
	_, err := c.recv(ctx, "recv", 1, true, func(b []byte) { msg = append([]byte{}, b...) })
	return msg, err
}

func (c *chanHandle) TryRecv(ctx context.Context) ([]byte, error) {
	var msg []byte
	_, err := c.recv(ctx, "tryrecv", 1, false, func(b []byte) { msg = append([]byte{}, b...) })
	return msg, err
}

func (c *chanHandle) RecvInto(ctx context.Context, buf []byte) (int, error) {
	if len(buf) < c.opts.MaxMessage {
		return 0, c.fail("recv", fmt.Errorf("%w: buffer of %d bytes, less than the channel's largest message of %d", ErrInvalidArgument, len(buf), c.opts.MaxMessage))
	}
	var size int
	_, err := c.recv(ctx, "recv", 1, true, func(b []byte) { size = copy(buf, b) })
	return size, err
}

// batchScratch collects a batch's bytes before they are copied into one
// allocation of the exact size; pooled, so a batch of a few messages does
// not allocate for n of the largest.
type batchScratch struct {
	buf  []byte
	ends []int
}

var batchPool = sync.Pool{New: func() any { return new(batchScratch) }}

// maxPooledBatch bounds the scratch kept for later batches.
const maxPooledBatch = 256 << 10

func (c *chanHandle) RecvBatch(ctx context.Context, n int) ([][]byte, error) {
	if n < 1 {
		return nil, c.fail("recvbatch", fmt.Errorf("%w: batch of %d messages, must be at least 1", ErrInvalidArgument, n))
	}
	sc := batchPool.Get().(*batchScratch)
	sc.buf, sc.ends = sc.buf[:0], sc.ends[:0]
	_, err := c.recv(ctx, "recvbatch", n, true, func(b []byte) {
		sc.buf = append(sc.buf, b...)
		sc.ends = append(sc.ends, len(sc.buf))
	})
	var out [][]byte
	if len(sc.ends) > 0 {
		// One allocation for the batch's bytes, cut into its messages.
		own := make([]byte, len(sc.buf))
		copy(own, sc.buf)
		out = make([][]byte, len(sc.ends))
		start := 0
		for i, end := range sc.ends {
			out[i] = own[start:end:end]
			start = end
		}
	}
	if cap(sc.buf) <= maxPooledBatch && cap(sc.ends) <= maxPooledBatch/8 {
		batchPool.Put(sc)
	}
	return out, err
}

func (c *chanHandle) RecvFunc(ctx context.Context, n int, take func(msg []byte)) (int, error) {
	if n < 1 {
		return 0, c.fail("recvfunc", fmt.Errorf("%w: batch of %d messages, must be at least 1", ErrInvalidArgument, n))
	}
	if take == nil {
		return 0, c.fail("recvfunc", fmt.Errorf("%w: nil take function", ErrInvalidArgument))
	}
	return c.recv(ctx, "recvfunc", n, true, take)
}

func (c *chanHandle) CloseSend(ctx context.Context) error {
	if err := c.enter(ctx); err != nil {
		return c.fail("closesend", err)
	}
	defer c.mu.RUnlock()
	return c.fail("closesend", c.d.CloseSend(ctx))
}

func (c *chanHandle) Close() error { return c.fail("close", c.close()) }

func (c *chanHandle) close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.d.Interrupt()
	c.mu.Lock()
	err := c.d.Close()
	c.mu.Unlock()
	c.b.forget(c)
	return err
}

var _ Channel = (*chanHandle)(nil)
