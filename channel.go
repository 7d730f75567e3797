package baton

import (
	"context"

	"github.com/batonlock/baton/internal/errs"
)

// Limits and defaults of ChannelOptions.
const (
	DefaultChannelCapacity = 1024    // messages
	DefaultMaxMessage      = 4096    // bytes
	MaxChannelCapacity     = 1 << 20 // messages
	MaxChannelMessage      = 1 << 20 // bytes
)

// Sentinel errors of channels.
var (
	// ErrChannelFull is returned by TrySend when the channel is full;
	// nothing was sent.
	ErrChannelFull = errs.ChannelFull
	// ErrChannelEmpty is returned by TryRecv when the channel is empty.
	ErrChannelEmpty = errs.ChannelEmpty
	// ErrChannelClosed is returned by every send once the channel was
	// closed (CloseSend), and by every receive once the channel is closed
	// and drained; a receive's error then matches io.EOF too.
	ErrChannelClosed = errs.ChannelClosed
	// ErrChannelBusy is returned by a send (receive) on a one-to-one
	// channel (ChannelOptions.OneToOne) whose sending (receiving) end
	// another open handle holds; nothing was sent (taken).
	ErrChannelBusy = errs.ChannelBusy
)

// ChannelOptions are the parameters of a channel, fixed when the name is
// first created. Every later opener must ask for the same values or 0
// (ErrMismatch otherwise, naming the values that exist).
type ChannelOptions struct {
	// Capacity is how many messages the channel holds before Send
	// waits: 1 to MaxChannelCapacity; 0 is the existing channel's, or
	// DefaultChannelCapacity for a new one.
	Capacity int
	// MaxMessage is the largest message, in bytes: 1 to
	// MaxChannelMessage; 0 is the existing channel's, or
	// DefaultMaxMessage for a new one. The same-host backend keeps
	// Capacity slots of this size (on tmpfs, pages are used only once
	// written).
	MaxMessage int
	// OneToOne makes a channel for one sending handle and one receiving
	// handle at a time, each of which may be used by many goroutines (one
	// at a time within an end); false takes the existing channel's kind,
	// or many-to-many for a new one. A handle takes an end at its first
	// send (receive) and keeps it until Close; a handle whose process has
	// exited gives it up at once. Meanwhile the other handles' sends
	// (receives) fail with ErrChannelBusy. The same-host backend serves it
	// with a ring whose ends publish once per call instead of once per
	// message (see bench for what that gains); Redis records the option
	// with the channel's parameters and, having no faster path for it,
	// does not hold the ends. A fill (SendFunc) or take (RecvFunc) runs
	// in its end's turn: it must not call that end of its own handle.
	OneToOne bool
}

// Channel is a named, bounded channel of byte messages between goroutines
// and processes that open the same name on the same backend: many senders
// and many receivers, as easy as a chan []byte.
//
// Guarantees:
//   - each message sent is received by exactly one receiver, whole;
//   - messages of one sender (one goroutine's Sends one after another, or
//     one SendBatch) are received in that order by every receiver;
//   - Send waits while the channel is full and Recv while it is empty,
//     woken by the backend (no polling); a call whose context ends first
//     returns the context's error having sent or taken nothing;
//   - a message larger than the channel's MaxMessage is refused with
//     ErrInvalidArgument before anything is written.
//
// Failures: a sender that dies before its Send returns may or may not have
// sent its message, never part of it; its slot never blocks the channel.
// A receiver that dies loses at most the messages it was taking: one for
// Recv, at most n for RecvBatch(n); those are received by nobody. See the
// backend's documentation for what outlives a restart.
//
// CloseSend closes the channel for everyone: later sends fail with
// ErrChannelClosed, and receivers get ErrChannelClosed (matching io.EOF
// too) once they have drained the messages sent before. It lasts as long
// as the channel. Close releases only the handle; blocked calls return
// ErrClosed.
//
// A handle is safe for concurrent use. Messages passed in are the
// caller's (not retained); messages returned are the receiver's own.
type Channel interface {
	// Name returns the name the handle was opened with.
	Name() string
	// Options returns the channel's parameters (never 0).
	Options() ChannelOptions
	// Send sends msg, waiting while the channel is full.
	Send(ctx context.Context, msg []byte) error
	// TrySend sends msg if there is room now, else returns
	// ErrChannelFull.
	TrySend(ctx context.Context, msg []byte) error
	// SendBatch waits until at least one message fits, then sends as
	// many of msgs, in order, as fit without waiting again, at the cost
	// of one wake-up of the receivers. It returns how many it sent; the
	// caller sends the rest. Every message is checked before any is sent.
	SendBatch(ctx context.Context, msgs [][]byte) (int, error)
	// SendFunc sends one message written in place, without a copy: fill
	// gets a buffer of MaxMessage bytes inside the channel and returns
	// how many it wrote. If fill returns an error or a length out of
	// range, nothing is sent. Receivers of the channel may wait behind
	// the slot while fill runs: keep it short.
	SendFunc(ctx context.Context, fill func(buf []byte) (int, error)) error
	// Recv takes the next message, waiting while the channel is empty.
	Recv(ctx context.Context) ([]byte, error)
	// TryRecv takes the next message if there is one, else returns
	// ErrChannelEmpty.
	TryRecv(ctx context.Context) ([]byte, error)
	// RecvInto takes the next message into buf, which must hold
	// MaxMessage bytes, and returns its length: no allocation.
	RecvInto(ctx context.Context, buf []byte) (int, error)
	// RecvBatch waits until there is at least one message, then takes up
	// to n without waiting again, at the cost of one wake-up of the
	// senders.
	RecvBatch(ctx context.Context, n int) ([][]byte, error)
	// RecvFunc waits until there is at least one message, then takes up
	// to n without waiting again, as RecvBatch does, but hands each to
	// take in place, in order: msg is valid only during the call (no copy
	// and no allocation where the backend allows it). It returns how many
	// it took. Read msg, do not modify it. If take panics, the panic goes
	// on to the caller and the message it had is taken (on a backend that
	// takes a batch in one request, Redis, the rest of that batch too).
	// Senders may wait behind the message while take runs: keep it short.
	RecvFunc(ctx context.Context, n int, take func(msg []byte)) (int, error)
	// CloseSend closes the channel for sending (see above). Closing a
	// closed channel is a no-op.
	CloseSend(ctx context.Context) error
	// Close releases the handle; the channel and its messages stay.
	Close() error
}
