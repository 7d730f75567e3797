package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/internal/sleep"
	"github.com/redis/go-redis/v9"
)

// A server that lost its data (restarted without persistence) forgets the
// leases it gave, and would grant them again at once while their holders
// still trust them. The acquire and poll scripts therefore grant only while
// a marker key exists beside the name: the restart loses the marker with
// everything else. A script that finds it missing grants nothing and
// changes nothing (it replies "not ready"); the client then reads the
// server's uptime, once, and sets the marker again when the server has run
// for a whole TTL, by when every lease given before the restart has
// expired; until then it waits. A server that never had a marker (new) is
// treated alike: nothing tells it apart from one that lost its data.
//
// One marker serves a whole single node; on a Redis Cluster a script may
// only touch keys of its name's hash slot, so there is one marker per slot.

// errNotReady is the reply of a script that found the marker missing.
var errNotReady = errors.New("the server lost its data (or is new), and leases it gave before may still run")

// markerKey returns the marker key for the keys of name.
func (d *backend) markerKey(name string) string {
	if !d.cluster {
		return d.alive
	}
	return d.o.Prefix + "alive:{" + slotTags()[keySlot(redisnode.EscapeName(name))] + "}"
}

// ready is called when a script found the marker missing. It reports how
// long to wait before trying again: zero when it found the server up for a
// TTL and set the marker.
func (d *backend) ready(ctx context.Context, marker string) (time.Duration, error) {
	var node redis.Cmdable = d.c
	if cc, ok := d.c.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, marker)
		if err != nil {
			return 0, err
		}
		node = n
	}
	return redisnode.Ready(ctx, node, marker, d.o.TTL, d.o.Logger)
}

// awaitReady waits until the marker is set, or ctx ends.
func (d *backend) awaitReady(ctx context.Context, marker string) error {
	for {
		left, err := d.ready(ctx, marker)
		if err != nil || left == 0 {
			return err
		}
		if err := sleep.For(ctx, left); err != nil {
			return err
		}
	}
}

// keySlot returns the Redis Cluster hash slot of a hash tag's content.
func keySlot(tag string) int { return int(crc16(tag) % 16384) }

// crc16 is CRC-16/XMODEM, the checksum of Redis Cluster's key slots.
func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c ^= uint16(s[i]) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
	}
	return c
}

// slotTags returns, for each hash slot, a short hash tag that falls in it.
var slotTags = sync.OnceValue(func() *[16384]string {
	var tags [16384]string
	for i, left := 0, len(tags); left > 0; i++ {
		t := strconv.FormatInt(int64(i), 36)
		if s := keySlot(t); tags[s] == "" {
			tags[s] = t
			left--
		}
	}
	return &tags
})

// notReady is a try-lock's answer to a script that found the marker
// missing: nil (try again) when ready set it, else an error matching
// baton.ErrLocked, since a lease given before may still run.
func (d *backend) notReady(ctx context.Context, marker string) error {
	left, err := d.ready(ctx, marker)
	if err != nil {
		return err
	}
	if left > 0 {
		return fmt.Errorf("%w for another %v: %w", errNotReady, left, baton.ErrLocked)
	}
	return nil
}
