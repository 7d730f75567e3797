package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batonlock/baton"
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
	return d.o.Prefix + "alive:{" + slotTags()[keySlot(escapeName(name))] + "}"
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
	return nodeReady(ctx, node, marker, d.o.TTL, d.o.Logger)
}

// nodeReady reads the uptime of node and sets marker on it when it has run
// for ttl; otherwise it reports how much longer it must run.
func nodeReady(ctx context.Context, node redis.Cmdable, marker string, ttl time.Duration, log *slog.Logger) (time.Duration, error) {
	info, err := node.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	up, err := uptime(info)
	if err != nil {
		return 0, err
	}
	// Uptime is the difference of two wall-clock readings in whole seconds
	// (now and the start, each rounded down), so it can read up to a second
	// more than the server has run: count one second less.
	need := (ttl + time.Second - 1).Truncate(time.Second) + time.Second
	if left := need - up; left > 0 {
		log.Warn("redislock: the server started empty; no grants until leases it may have given before have expired",
			"wait", left)
		return left, nil
	}
	return 0, node.Set(ctx, marker, strconv.FormatInt(time.Now().UnixMilli(), 10), 0).Err()
}

// awaitReady waits until the marker is set, or ctx ends.
func (d *backend) awaitReady(ctx context.Context, marker string) error {
	for {
		left, err := d.ready(ctx, marker)
		if err != nil || left == 0 {
			return err
		}
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// uptime reads uptime_in_seconds from an INFO reply.
func uptime(info string) (time.Duration, error) {
	for l := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "uptime_in_seconds:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				break
			}
			return time.Duration(n) * time.Second, nil
		}
	}
	return 0, fmt.Errorf("INFO has no uptime_in_seconds")
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

// checkNode checks in the background whether node i, whose marker is
// missing, has run for a TTL, and sets the marker if so (restart.go). One
// check runs at a time per node, and none before the node could be ready.
func (r *rlDriver) checkNode(i int, marker string) {
	r.readyMu.Lock()
	if r.checking[i] || time.Now().Before(r.recheck[i]) {
		r.readyMu.Unlock()
		return
	}
	r.checking[i] = true
	r.readyMu.Unlock()
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), max(r.o.nodeTimeout, 100*time.Millisecond))
		defer cancel()
		left, err := nodeReady(ctx, r.nodes[i], marker, r.o.TTL, r.o.Logger)
		if err != nil {
			left = maxRedlockWait
		}
		r.readyMu.Lock()
		r.checking[i] = false
		r.recheck[i] = time.Now().Add(left)
		r.readyMu.Unlock()
	}()
}
