package driver

import "context"

// ChannelOpener is implemented by backends that serve channels
// (baton.Channel). It is optional: for a backend without it the core returns
// an error matching baton.ErrUnsupported from Backend.Channel.
type ChannelOpener interface {
	// OpenChannel opens a driver for a name the core has validated, with a
	// capacity (messages) and largest message (bytes) that are either in
	// range or 0. 0 asks for the existing channel's value, or the default
	// (baton.DefaultChannelCapacity, baton.DefaultMaxMessage) when the
	// channel is created. A channel that exists with other non-zero
	// parameters is refused with errors matching baton.ErrMismatch
	// (*baton.MismatchError naming the existing values). oneToOne asks for
	// a channel of one sending and one receiving handle at a time
	// (baton.ChannelOptions.OneToOne); false takes the existing channel's
	// kind. Options reports the kind the channel has.
	OpenChannel(ctx context.Context, name string, capacity, maxMessage int, oneToOne bool) (Channel, error)
}

// Channel is one handle's connection to a named channel.
//
// What the core guarantees to a Channel driver:
//   - ctx is not nil and not done when a call starts, and the handle is
//     open;
//   - every message given to Send is at most maxMessage bytes, msgs is not
//     empty, and max is at least 1;
//   - Interrupt is called once, by the core's Close, before it waits for
//     the calls in progress to return; Close is called once after that.
//
// What a driver guarantees to the core:
//   - each committed message is taken by exactly one Recv, and messages sent
//     by one Send, or by Sends of one goroutine one after another, are
//     taken in that order by every receiver;
//   - with block false, Send returns baton.ErrChannelFull having sent
//     nothing and Recv baton.ErrChannelEmpty having taken nothing, instead
//     of waiting;
//   - a blocking call waits for the backend's notification (a futex, a
//     blocking pop), not by polling, and returns ctx's error promptly once
//     ctx is done, having sent or taken nothing;
//   - after CloseSend (by any handle of the channel) Send returns
//     baton.ErrChannelClosed, and Recv does too once every message
//     committed before is taken;
//   - after Interrupt every call returns baton.ErrClosed promptly;
//   - take is called with a view of each message that is valid only during
//     the call; msgs are not retained after Send returns;
//   - errors are bare causes, as for the other drivers.
type Channel interface {
	// Options returns the channel's capacity, largest message and kind.
	Options() (capacity, maxMessage int, oneToOne bool)
	// Send sends msgs in order, as many as fit: with block, it waits
	// until at least one fits. It returns how many it sent.
	Send(ctx context.Context, msgs [][]byte, block bool) (int, error)
	// SendFunc sends one message written in place: fill gets a buffer of
	// maxMessage bytes in the channel and returns the length it wrote. A
	// length out of range or an error from fill sends nothing.
	SendFunc(ctx context.Context, block bool, fill func(buf []byte) (int, error)) error
	// Recv takes up to max messages, in order, calling take for each: with
	// block, it waits until there is at least one. It returns how many it
	// took.
	Recv(ctx context.Context, max int, block bool, take func(msg []byte)) (int, error)
	// CloseSend closes the channel for sending, for every handle.
	CloseSend(ctx context.Context) error
	Interrupt()
	Close() error
}
