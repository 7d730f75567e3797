package baton_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// A producer and a consumer, which could be two processes: the producer
// sends work items and closes the channel; the consumer drains it and
// sees the end as io.EOF.
func ExampleChannel() {
	dir, _ := os.MkdirTemp("", "baton-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	b, _ := local.Open(dir)
	defer b.Close()

	out, _ := b.Channel(ctx, "jobs", baton.ChannelOptions{Capacity: 64, MaxMessage: 256})
	in, _ := b.Channel(ctx, "jobs", baton.ChannelOptions{}) // 0: the existing channel's options
	go func() {
		for _, job := range []string{"resize a.png", "resize b.png", "resize c.png"} {
			_ = out.Send(ctx, []byte(job)) // waits while the channel is full
		}
		_ = out.CloseSend(ctx)
	}()
	for {
		msg, err := in.Recv(ctx) // waits while the channel is empty
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(string(msg))
	}
	err := out.Send(ctx, []byte("too late"))
	fmt.Println(errors.Is(err, baton.ErrChannelClosed))
	// Output:
	// resize a.png
	// resize b.png
	// resize c.png
	// true
}
