package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/batonlock/baton"
	"github.com/spf13/cobra"
)

// chanFlags are the flags that send and recv share.
type chanFlags struct {
	raw      bool
	wait     time.Duration
	capacity int
	maxMsg   int
	one      bool
}

func (f *chanFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.raw, "raw", false, "messages framed by a 4-byte big-endian length instead of one per line")
	cmd.Flags().DurationVarP(&f.wait, "wait", "w", 0, "give up after this `DURATION` (exit 1); 0 waits for ever")
	cmd.Flags().IntVar(&f.capacity, "capacity", 0, "capacity in messages of a channel created here (default: the existing one's, or 1024)")
	cmd.Flags().IntVar(&f.maxMsg, "max-message", 0, "largest message in bytes of a channel created here (default: the existing one's, or 4096)")
	cmd.Flags().BoolVar(&f.one, "one-to-one", false, "a channel of one sending and one receiving process at a time (default: the existing one's kind, or many-to-many)")
}

func newChanCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chan",
		Short: "Send and receive messages on a named channel between processes",
		Long: `A channel is a bounded queue of messages in the backend: each message goes
to exactly one receiver, in order per sender. Sending waits while the
channel is full, receiving while it is empty. Messages are lines of text, or
with --raw a 4-byte big-endian length followed by that many bytes.`,
	}
	cmd.AddCommand(newChanSendCmd(), newChanRecvCmd())
	return cmd
}

func newChanSendCmd() *cobra.Command {
	var f chanFlags
	var closeSend bool
	cmd := &cobra.Command{
		Use:   "send [flags] NAME [DATA|-]",
		Short: "Send DATA, or every message read from stdin, on the channel NAME",
		Long: `Send DATA as one message, or (DATA "-" or absent) each line of stdin, or
with --raw each length-framed message of stdin. Waits while the channel is
full. Exits 1 when the channel is closed or -w ran out.`,
		Example: `  baton chan send jobs "resize a.png"
  find . -name '*.png' | baton chan send --close jobs`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withChannel(cmd, args[0], f, func(ctx context.Context, ch baton.Channel) error {
				var err error
				if len(args) == 2 && args[1] != "-" {
					err = ch.Send(ctx, []byte(args[1]))
				} else {
					err = sendAll(ctx, ch, os.Stdin, f.raw)
				}
				if err == nil && closeSend {
					err = ch.CloseSend(ctx)
				}
				return err
			})
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&closeSend, "close", false, "close the channel for sending afterwards: receivers end once it is drained")
	return cmd
}

func newChanRecvCmd() *cobra.Command {
	var f chanFlags
	var n int
	cmd := &cobra.Command{
		Use:   "recv [flags] NAME",
		Short: "Receive messages from the channel NAME and write them to stdout",
		Long: `Receive -n messages (all until the channel is closed and drained, with
-n 0) and write each as a line, or with --raw framed by its length.
Exits 0 when it has them all or the channel ended, 1 when -w ran out.`,
		Example: `  baton chan recv -n 1 jobs
  baton chan recv -n 0 jobs | xargs -n1 ./resize`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 0 {
				return usageErrorf("-n %d: must be 0 (all) or more", n)
			}
			return withChannel(cmd, args[0], f, func(ctx context.Context, ch baton.Channel) error {
				out := bufio.NewWriter(os.Stdout)
				defer out.Flush()
				for got := 0; n == 0 || got < n; got++ {
					msg, err := ch.Recv(ctx)
					if errors.Is(err, io.EOF) {
						return nil
					}
					if err != nil {
						return err
					}
					if f.raw {
						_ = binary.Write(out, binary.BigEndian, uint32(len(msg)))
						_, _ = out.Write(msg)
					} else {
						_, _ = out.Write(append(msg, '\n'))
					}
					if err := out.Flush(); err != nil {
						return exitWith(exitBackend, err)
					}
				}
				return nil
			})
		},
	}
	f.add(cmd)
	cmd.Flags().IntVarP(&n, "count", "n", 1, "receive this many messages; 0 for all until the channel ends")
	return cmd
}

// withChannel opens the channel name of cmd's backend and runs fn with a
// context that -w and SIGINT/SIGTERM end, mapping errors to exit codes.
func withChannel(cmd *cobra.Command, name string, f chanFlags, fn func(ctx context.Context, ch baton.Channel) error) error {
	if err := baton.ValidateName(name); err != nil {
		return usageErrorf("%s", errText(err))
	}
	if f.wait < 0 {
		return usageErrorf("-w %v: must not be negative", f.wait)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.wait)
		defer cancel()
	}
	b, err := openBackend(ctx, backendURL(cmd), backendOptions{})
	if err != nil {
		return err
	}
	defer closeBackend(b, releaseTimeout)
	ch, err := b.Channel(ctx, name, baton.ChannelOptions{Capacity: f.capacity, MaxMessage: f.maxMsg, OneToOne: f.one})
	if err == nil {
		err = fn(ctx, ch)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return exitWith(exitConflict, fmt.Errorf("channel %q: -w %v ran out", name, f.wait))
	case errors.Is(err, context.Canceled):
		return exitWith(130, nil)
	case errors.Is(err, baton.ErrChannelClosed), errors.Is(err, baton.ErrChannelBusy):
		return exitWith(exitConflict, err)
	}
	return classify(err)
}

// sendAll sends the messages of r: lines, or length-framed with raw.
func sendAll(ctx context.Context, ch baton.Channel, r io.Reader, raw bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		var msg []byte
		if raw {
			var size uint32
			if err := binary.Read(br, binary.BigEndian, &size); err == io.EOF {
				return nil
			} else if err != nil {
				return usageErrorf("stdin: %v", err)
			}
			msg = make([]byte, size)
			if _, err := io.ReadFull(br, msg); err != nil {
				return usageErrorf("stdin: a message of %d bytes is cut short: %v", size, err)
			}
		} else {
			line, err := br.ReadBytes('\n')
			if len(line) == 0 && err == io.EOF {
				return nil
			}
			if err != nil && err != io.EOF {
				return exitWith(exitBackend, err)
			}
			msg = bytes.TrimSuffix(line, []byte{'\n'})
		}
		if err := ch.Send(ctx, msg); err != nil {
			return err
		}
	}
}
