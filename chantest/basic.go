package chantest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

func testBasics(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	c := e.open(t, b, ctx, name, baton.ChannelOptions{Capacity: 2, MaxMessage: 64})
	if got := c.Options(); got != (baton.ChannelOptions{Capacity: 2, MaxMessage: 64, OneToOne: e.one}) {
		t.Errorf("Options() = %+v", got)
	}
	if c.Name() != name {
		t.Errorf("Name() = %q", c.Name())
	}
	// Another handle sees the same channel, with 0 options taking the
	// existing ones. c sends and c2 receives (as on a one-to-one channel).
	c2 := e.open(t, b, ctx, name, baton.ChannelOptions{})
	if got := c2.Options(); got != c.Options() {
		t.Errorf("Options() of a second handle = %+v", got)
	}
	_, err := c2.TryRecv(ctx)
	is(t, "TryRecv of an empty channel", err, baton.ErrChannelEmpty)
	ok(t, "Send", c.Send(ctx, []byte("one")))
	ok(t, "TrySend", c.TrySend(ctx, nil))
	is(t, "TrySend to a full channel", c.TrySend(ctx, []byte("three")), baton.ErrChannelFull)
	msg, err := c2.Recv(ctx)
	ok(t, "Recv", err)
	if string(msg) != "one" {
		t.Errorf("Recv = %q, want one", msg)
	}
	buf := make([]byte, 64)
	n, err := c2.RecvInto(ctx, buf)
	ok(t, "RecvInto", err)
	if n != 0 {
		t.Errorf("RecvInto of an empty message = %d bytes", n)
	}
	// A Recv waiting on an empty channel wakes on a Send.
	got := make(chan string, 1)
	go func() {
		m, err := c2.Recv(ctx)
		got <- fmt.Sprint(string(m), " ", err)
	}()
	time.Sleep(20 * time.Millisecond)
	ok(t, "Send to a waiting receiver", c.Send(ctx, []byte("woken")))
	if s := within(t, got, 10*time.Second, "Recv did not wake on a Send"); s != "woken <nil>" {
		t.Errorf("waiting Recv = %q", s)
	}
	// A Send waiting on a full channel wakes on a Recv.
	ok(t, "fill", c.Send(ctx, []byte("a")))
	ok(t, "fill", c.Send(ctx, []byte("b")))
	sent := make(chan error, 1)
	go func() { sent <- c.Send(ctx, []byte("c")) }()
	time.Sleep(20 * time.Millisecond)
	for _, want := range []string{"a", "b", "c"} {
		m, err := c2.Recv(ctx)
		ok(t, "Recv", err)
		if string(m) != want {
			t.Errorf("Recv = %q, want %q", m, want)
		}
	}
	ok(t, "Send that waited", within(t, sent, 10*time.Second, "Send did not wake on a Recv"))
}

func testBatch(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	c := e.open(t, b, ctx, name, baton.ChannelOptions{Capacity: 8, MaxMessage: 16})
	var msgs [][]byte
	for i := range 12 {
		msgs = append(msgs, []byte(fmt.Sprint("m", i)))
	}
	n, err := c.SendBatch(ctx, msgs)
	ok(t, "SendBatch", err)
	if n != 8 {
		t.Errorf("SendBatch of 12 into 8 slots sent %d", n)
	}
	got, err := c.RecvBatch(ctx, 5)
	ok(t, "RecvBatch", err)
	if len(got) != 5 {
		t.Errorf("RecvBatch(5) of 8 took %d", len(got))
	}
	m, err := c.SendBatch(ctx, msgs[n:])
	ok(t, "SendBatch of the rest", err)
	if m != 4 {
		t.Errorf("SendBatch of 4 into 5 free slots sent %d", m)
	}
	rest, err := c.RecvBatch(ctx, 1<<62) // any bound: no buffer of that size
	ok(t, "RecvBatch", err)
	got = append(got, rest...)
	if len(got) != 12 {
		t.Fatalf("took %d messages in all, want 12", len(got))
	}
	for i, g := range got {
		if !bytes.Equal(g, msgs[i]) {
			t.Errorf("message %d = %q, want %q", i, g, msgs[i])
		}
	}
}

func testZeroCopy(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	c := e.open(t, b, ctx, name, baton.ChannelOptions{Capacity: 4, MaxMessage: 32})
	ok(t, "SendFunc", c.SendFunc(ctx, func(buf []byte) (int, error) {
		if len(buf) != 32 {
			return 0, fmt.Errorf("buffer of %d bytes, want 32", len(buf))
		}
		return copy(buf, "in place"), nil
	}))
	boom := errors.New("boom")
	is(t, "SendFunc whose fill fails", c.SendFunc(ctx, func([]byte) (int, error) { return 0, boom }), boom)
	is(t, "SendFunc whose fill writes too much", c.SendFunc(ctx, func([]byte) (int, error) { return 33, nil }), baton.ErrInvalidArgument)
	buf := make([]byte, 32)
	n, err := c.RecvInto(ctx, buf)
	ok(t, "RecvInto", err)
	if string(buf[:n]) != "in place" {
		t.Errorf("RecvInto = %q", buf[:n])
	}
	// The failed fills sent nothing.
	_, err = c.TryRecv(ctx)
	is(t, "TryRecv after failed fills", err, baton.ErrChannelEmpty)
	_, err = c.RecvInto(ctx, make([]byte, 31))
	is(t, "RecvInto a short buffer", err, baton.ErrInvalidArgument)
}

// testRecvFunc: messages handed in place, in order, up to n; a take that
// panics consumes its message and the channel goes on, every slot usable.
func testRecvFunc(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	c := e.open(t, b, ctx, name, baton.ChannelOptions{Capacity: 4, MaxMessage: 16})
	send := func(ms ...string) {
		t.Helper()
		for _, m := range ms {
			ok(t, "Send", c.Send(ctx, []byte(m)))
		}
	}
	var got []string
	collect := func(m []byte) { got = append(got, string(m)) }
	send("a", "", "c")
	n, err := c.RecvFunc(ctx, 2, collect)
	ok(t, "RecvFunc", err)
	if n != 2 || !slices.Equal(got, []string{"a", ""}) {
		t.Errorf("RecvFunc(2) of 3 = %d, %q; want 2, [a \"\"]", n, got)
	}
	send("d")
	n, err = c.RecvFunc(ctx, 10, collect)
	ok(t, "RecvFunc", err)
	if n != 2 || !slices.Equal(got, []string{"a", "", "c", "d"}) {
		t.Errorf("RecvFunc(10) of 2 = %d, all %q", n, got)
	}

	send("boom", "after")
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic of take did not reach the caller")
			}
		}()
		_, _ = c.RecvFunc(ctx, 1, func([]byte) { panic("take") })
	}()
	m, err := c.TryRecv(ctx)
	ok(t, "TryRecv after a panicking take", err)
	if string(m) != "after" {
		t.Errorf("after a take panicked on %q, TryRecv = %q, want %q", "boom", m, "after")
	}
	// Every slot is free again: the panicking take's slot was given back.
	for i := range 4 {
		ok(t, "TrySend into an emptied channel", c.TrySend(ctx, []byte{byte('0' + i)}))
	}
	is(t, "TrySend into a full channel", c.TrySend(ctx, []byte("x")), baton.ErrChannelFull)
	got = got[:0]
	for len(got) < 4 {
		_, err := c.RecvFunc(ctx, 4, collect)
		ok(t, "RecvFunc", err)
	}
	if !slices.Equal(got, []string{"0", "1", "2", "3"}) {
		t.Errorf("RecvFunc after a refill = %q", got)
	}

	ok(t, "CloseSend", c.CloseSend(ctx))
	_, err = c.RecvFunc(ctx, 4, collect)
	is(t, "RecvFunc of a closed, drained channel", err, io.EOF)
}

func testBadInput(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	unchanged := e.sameObjects(t)
	for _, n := range []string{"", "a//b", "../x", "a\x00b"} {
		_, err := b.Channel(ctx, n, baton.ChannelOptions{})
		is(t, fmt.Sprintf("Channel(%q)", n), err, baton.ErrInvalidName)
	}
	for _, o := range []baton.ChannelOptions{
		{Capacity: -1}, {MaxMessage: -1},
		{Capacity: baton.MaxChannelCapacity + 1}, {MaxMessage: baton.MaxChannelMessage + 1},
	} {
		_, err := b.Channel(ctx, name, o)
		is(t, fmt.Sprintf("Channel(%+v)", o), err, baton.ErrInvalidArgument)
	}
	//lint:ignore SA1012 a nil context is the bad input
	_, err := b.Channel(nil, name, baton.ChannelOptions{}) //nolint:staticcheck
	is(t, "Channel(nil context)", err, baton.ErrInvalidArgument)
	unchanged()
	c := open(t, b, ctx, name, baton.ChannelOptions{Capacity: 4, MaxMessage: 8})
	err = c.Send(ctx, []byte("123456789"))
	is(t, "Send of 9 bytes to a channel of 8", err, baton.ErrInvalidArgument)
	if err != nil && !strings.Contains(err.Error(), "9 bytes") {
		t.Errorf("the error does not say the size: %v", err)
	}
	_, err = c.SendBatch(ctx, [][]byte{[]byte("ok"), make([]byte, 9)})
	is(t, "SendBatch with one message too large", err, baton.ErrInvalidArgument)
	_, err = c.SendBatch(ctx, nil)
	is(t, "SendBatch of nothing", err, baton.ErrInvalidArgument)
	_, err = c.RecvBatch(ctx, 0)
	is(t, "RecvBatch(0)", err, baton.ErrInvalidArgument)
	is(t, "SendFunc(nil)", c.SendFunc(ctx, nil), baton.ErrInvalidArgument)
	_, err = c.RecvFunc(ctx, 0, func([]byte) {})
	is(t, "RecvFunc(0)", err, baton.ErrInvalidArgument)
	_, err = c.RecvFunc(ctx, 1, nil)
	is(t, "RecvFunc(nil)", err, baton.ErrInvalidArgument)
	//lint:ignore SA1012 a nil context is the bad input
	is(t, "Send(nil context)", c.Send(nil, nil), baton.ErrInvalidArgument) //nolint:staticcheck
	// Nothing refused was written.
	_, err = c.TryRecv(ctx)
	is(t, "TryRecv after refused sends", err, baton.ErrChannelEmpty)
}

func testMismatch(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	open(t, b, ctx, name, baton.ChannelOptions{Capacity: 4, MaxMessage: 64})
	_, err := b.Channel(ctx, name, baton.ChannelOptions{Capacity: 8, MaxMessage: 64})
	is(t, "Channel with another capacity", err, baton.ErrMismatch)
	var me *baton.MismatchError
	if !errors.As(err, &me) || me.Param != "capacity" || me.Have != 4 || me.Want != 8 {
		t.Errorf("Channel with another capacity: %v, want a MismatchError naming capacity 4", err)
	}
	_, err = b.Channel(ctx, name, baton.ChannelOptions{MaxMessage: 128})
	is(t, "Channel with another largest message", err, baton.ErrMismatch)
	if err == nil || !strings.Contains(err.Error(), "largest message 64, not 128") {
		t.Errorf("the error does not name the existing largest message: %v", err)
	}
	_, err = b.Channel(ctx, name, baton.ChannelOptions{Capacity: 2, MaxMessage: 32})
	if err == nil || !strings.Contains(err.Error(), "capacity 4") || !strings.Contains(err.Error(), "largest message 64") {
		t.Errorf("a clash of both parameters does not name both: %v", err)
	}
}

func testCancel(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	c := e.open(t, b, ctx, name, baton.ChannelOptions{Capacity: 1, MaxMessage: 8})
	dctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Recv(dctx)
	is(t, "Recv of an empty channel past its deadline", err, context.DeadlineExceeded)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a cancelled Recv returned after %v", d)
	}
	ok(t, "Send", c.Send(ctx, []byte("x")))
	cctx, cancel2 := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() { res <- c.Send(cctx, []byte("y")) }()
	time.Sleep(20 * time.Millisecond)
	cancel2()
	is(t, "Send to a full channel, cancelled", within(t, res, 5*time.Second, "a cancelled Send did not return"), context.Canceled)
	// The cancelled Send sent nothing and the channel works on.
	m, err := c.Recv(ctx)
	ok(t, "Recv", err)
	if string(m) != "x" {
		t.Errorf("Recv = %q, want x", m)
	}
	_, err = c.TryRecv(ctx)
	is(t, "TryRecv after the cancelled Send", err, baton.ErrChannelEmpty)
	is(t, "Send with a done context", c.Send(cctx, []byte("z")), context.Canceled)
	_, err = c.TryRecv(ctx)
	is(t, "TryRecv after a Send with a done context", err, baton.ErrChannelEmpty)
}

func testCloseDrain(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	c := e.open(t, b, ctx, name, baton.ChannelOptions{Capacity: 4, MaxMessage: 8})
	r := e.open(t, b, ctx, name, baton.ChannelOptions{})
	for _, m := range []string{"1", "2", "3"} {
		ok(t, "Send", c.Send(ctx, []byte(m)))
	}
	ok(t, "CloseSend", c.CloseSend(ctx))
	ok(t, "CloseSend again", r.CloseSend(ctx))
	is(t, "Send after CloseSend", c.Send(ctx, []byte("4")), baton.ErrChannelClosed)
	is(t, "Send on another handle after CloseSend", r.TrySend(ctx, []byte("4")), baton.ErrChannelClosed)
	for _, want := range []string{"1", "2", "3"} {
		m, err := r.Recv(ctx)
		ok(t, "Recv after CloseSend", err)
		if string(m) != want {
			t.Errorf("Recv = %q, want %q", m, want)
		}
	}
	_, err := r.Recv(ctx)
	is(t, "Recv of a closed, drained channel", err, io.EOF)
	is(t, "Recv of a closed, drained channel", err, baton.ErrChannelClosed)
	_, err = r.TryRecv(ctx)
	is(t, "TryRecv of a closed, drained channel", err, io.EOF)

	// A receiver waiting on an empty channel hears of the close.
	_, ctx2, name2 := e.start(t)
	c2 := e.open(t, b, ctx2, name2, baton.ChannelOptions{Capacity: 4, MaxMessage: 8})
	r2 := e.open(t, b, ctx2, name2, baton.ChannelOptions{})
	res := make(chan error, 1)
	go func() {
		_, err := r2.Recv(ctx2)
		res <- err
	}()
	time.Sleep(20 * time.Millisecond)
	ok(t, "CloseSend", c2.CloseSend(ctx2))
	is(t, "waiting Recv at CloseSend", within(t, res, 5*time.Second, "a waiting Recv did not hear of CloseSend"), io.EOF)
}

func testHandleClose(t *testing.T, e *env) {
	b, ctx, name := e.start(t)
	c, err := b.Channel(ctx, name, baton.ChannelOptions{Capacity: 1, MaxMessage: 8, OneToOne: e.one})
	ok(t, "Channel", err)
	res := make(chan error, 1)
	go func() {
		_, err := c.Recv(ctx)
		res <- err
	}()
	time.Sleep(20 * time.Millisecond)
	ok(t, "Close", c.Close())
	is(t, "Recv waiting at Close", within(t, res, 5*time.Second, "a waiting Recv did not return at Close"), baton.ErrClosed)
	is(t, "Send after Close", c.Send(ctx, nil), baton.ErrClosed)
	ok(t, "Close again", c.Close())
	// The channel stays, and its next handle works.
	c2 := e.open(t, b, ctx, name, baton.ChannelOptions{})
	ok(t, "Send on a new handle", c2.Send(ctx, []byte("x")))
}

// sameObjects notes the backend's objects (Suite.Objects, when set) and
// returns a check that they are still the same: refused calls created
// nothing.
func (e *env) sameObjects(t *testing.T) (check func()) {
	t.Helper()
	if e.s.Objects == nil {
		return func() {}
	}
	before, err := e.s.Objects(e.cfg)
	ok(t, "objects", err)
	return func() {
		t.Helper()
		after, err := e.s.Objects(e.cfg)
		ok(t, "objects", err)
		if !slices.Equal(before, after) {
			t.Errorf("refused calls created objects: before %q, after %q", before, after)
		}
	}
}
