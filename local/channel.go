package local

import (
	"context"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/local/shmchan"
)

// OpenChannel opens a channel (driver.ChannelOpener): a ring of slots in
// shared memory (package shmchan).
func (d *backend) OpenChannel(ctx context.Context, name string, capacity, maxMessage int, oneToOne bool) (driver.Channel, error) {
	return shmchan.OpenEntry(d.ns.Resolve(shmchan.Kind, name), capacity, maxMessage, oneToOne)
}

var _ driver.ChannelOpener = (*backend)(nil)
