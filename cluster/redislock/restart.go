package redislock

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/batonlock/baton/cluster/lease"
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
// long to wait before trying again, as the error of the wait: nil when it
// found the server up for a TTL and set the marker.
func (d *backend) ready(ctx context.Context, marker string) (*redisnode.RestartWaitError, error) {
	var node redis.Cmdable = d.c
	if cc, ok := d.c.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, marker)
		if err != nil {
			return nil, err
		}
		node = n
	}
	left, err := redisnode.Ready(ctx, node, marker, d.o.TTL, redisnode.RunIDs(&d.o.Config))
	if err != nil || left == 0 {
		return nil, err
	}
	w := &redisnode.RestartWaitError{Left: left}
	// A failover client's address is a placeholder; its Sentinels find
	// the node.
	if oc, ok := node.(interface{ Options() *redis.Options }); ok && oc.Options().Addr != "FailoverClient" {
		w.Addr = oc.Options().Addr
	}
	return w, nil
}

// awaitReady waits until the marker is set, or ctx ends: then it returns
// ctx's error with the wait as a second cause. It tells the wait in the
// log, as the caller waits for no holder.
func (d *backend) awaitReady(ctx context.Context, marker string) error {
	for {
		w, err := d.ready(ctx, marker)
		if err != nil || w == nil {
			return ctxErr(ctx, err)
		}
		d.notices.Tell(d.o.Logger, w)
		if sleep.For(ctx, w.Left) != nil {
			return redisnode.CtxErr(ctx, w)
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
// missing: nil (try again) when ready set it, else the wait
// (ErrRestartWait), since a lease given before may still run. It is not
// ErrLocked: nobody need hold the lock.
func (d *backend) notReady(ctx context.Context, marker string) error {
	w, err := d.ready(ctx, marker)
	if err != nil {
		return err
	}
	if w != nil {
		return w
	}
	return nil
}

// ErrRestartWait is matched (errors.Is) by the error of a TryLock,
// TryRLock or TryAcquire refused because the server started empty: it
// restarted without its data, or is new, and leases it may have given
// before can still run, so it grants nothing until it has run for a TTL.
// It is not baton.ErrLocked: nobody need hold the lock. A blocking
// acquisition waits instead, says so once in the log of lease.WithLogger
// (at Warn: "waiting up to 9s: the server … started empty and may have
// lost grants; …"), and if its context ends first, its error matches
// both the context's error and ErrRestartWait. errors.As with a
// *RestartWaitError tells the server and how much longer it waits.
var ErrRestartWait = redisnode.ErrRestartWait

// RestartWaitError is the error behind ErrRestartWait.
type RestartWaitError = redisnode.RestartWaitError

// WithRunID tells the backend that the servers whose run id (INFO server:
// run_id) is one of ids need no restart-safety wait (see ErrRestartWait):
// the caller started each of them empty and saw its run id before any
// client used it. A server that restarts gets a new run id, so the option
// cannot vouch for a server that lost its data; it must not be given for
// one whose data was flushed while leases ran. URL parameter run_id
// (several separated by commas). Other backends refuse it.
func WithRunID(ids ...string) lease.Option { return redisnode.WithRunID(ids...) }
