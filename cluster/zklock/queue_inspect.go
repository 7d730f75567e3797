package zklock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/queuedetail"
)

// Inspection of queues: a queue is listed once its nodes are made (by its
// first Put); they stay when its jobs are done. Inspect shows its claims
// as holders and its counts in Detail; Remove deletes its nodes, claims
// included, so a claimant's Ack or Retry finds its claim gone (ErrLost).

// inspectQueue reads the queue's record names, claims and dead letters.
// They are read one after another, not at one zxid: counts may be off by
// a job that moved meanwhile.
func (b *backend) inspectQueue(ctx context.Context, name string) (baton.Info, error) {
	d := &queueDriver{b: b, dir: b.dir(baton.KindQueue, name)}
	info := baton.Info{Name: name, Kind: baton.KindQueue, Backend: b.Kind(), Impl: "znodes", Holders: []baton.Holder{}, Waiters: -1}
	type claim struct {
		id uint64
		st *zk.Stat
	}
	type read struct {
		rs, ds []string
		cs     []claim
	}
	r, err := req(b, ctx, func() (read, error) {
		var r read
		if _, _, err := b.c.Get(d.dir + "/n"); err != nil {
			return r, err
		}
		var err error
		if r.rs, _, err = b.c.Children(d.dir + "/r"); noNode(err) != nil {
			return r, err
		}
		cs, _, err := b.c.Children(d.dir + "/c")
		if noNode(err) != nil {
			return r, err
		}
		for _, c := range cs {
			id, perr := strconv.ParseUint(c, 16, 64)
			_, st, err := b.c.Get(d.dir + "/c/" + c)
			if perr != nil || errors.Is(err, zk.ErrNoNode) {
				continue // not ours, or given back meanwhile
			}
			if err != nil {
				return r, err
			}
			r.cs = append(r.cs, claim{id, st})
		}
		r.ds, _, err = b.c.Children(d.dir + "/d")
		return r, noNode(err)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return info, fmt.Errorf("queue %q: %w", name, fs.ErrNotExist)
	}
	if err != nil {
		return info, err
	}
	claimed := make(map[uint64]bool, len(r.cs))
	for _, c := range r.cs {
		claimed[c.id] = true
		info.Holders = append(info.Holders, baton.Holder{Mode: "exclusive", Since: time.UnixMilli(c.st.Ctime).UTC(),
			Owner: fmt.Sprintf("job %d, session %x", c.id, c.st.EphemeralOwner)})
	}
	now := time.Now()
	var ready, delayed int
	oldest := int64(-1)
	for _, n := range r.rs {
		at, id, ok := parseR(n)
		switch {
		case !ok || claimed[id]:
		case at > now.UnixNano():
			delayed++
		default:
			ready++
			if oldest < 0 || at < oldest {
				oldest = at
			}
		}
	}
	var age time.Duration
	if oldest >= 0 {
		age = now.Sub(time.Unix(0, oldest))
	}
	info.Detail = queuedetail.Format(queuedetail.Counts{Ready: ready, Delayed: delayed, InFlight: len(r.cs), Dead: len(r.ds), Oldest: age})
	return info, nil
}

// removeQueue deletes the queue's nodes, children first.
func (b *backend) removeQueue(ctx context.Context, name string) error {
	dir := b.dir(baton.KindQueue, name)
	_, err := req(b, ctx, func() (struct{}, error) {
		if _, _, err := b.c.Get(dir + "/n"); err != nil {
			return struct{}{}, err
		}
		for {
			for _, sub := range []string{"/c", "/r", "/k", "/d"} {
				cs, _, err := b.c.Children(dir + sub)
				if noNode(err) != nil {
					return struct{}{}, err
				}
				for _, c := range cs {
					if err := noNode(b.c.Delete(dir+sub+"/"+c, -1)); err != nil {
						return struct{}{}, err
					}
				}
				// A node that came meanwhile is deleted in the next round.
				if err := noNode(b.c.Delete(dir+sub, -1)); err != nil && !errors.Is(err, zk.ErrNotEmpty) {
					return struct{}{}, err
				}
			}
			err := noNode(b.c.Delete(dir+"/n", -1))
			if err == nil {
				err = noNode(b.c.Delete(dir, -1))
			}
			if !errors.Is(err, zk.ErrNotEmpty) {
				return struct{}{}, err
			}
		}
	})
	if errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("queue %q: %w", name, fs.ErrNotExist)
	}
	return err
}
