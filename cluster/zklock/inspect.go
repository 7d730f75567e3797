package zklock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/listing"
)

var kinds = []baton.Kind{baton.KindMutex, baton.KindRWMutex, baton.KindSemaphore, baton.KindCond, baton.KindQueue}

// List returns every name of every kind under the prefix, queues
// included (queue_inspect.go).
func (b *backend) List(ctx context.Context) ([]baton.Info, error) {
	var refs []listing.Ref
	for _, k := range kinds {
		names, err := req(b, ctx, func() ([]string, error) {
			ns, _, err := b.c.Children(b.o.Prefix + "/" + string(k))
			return ns, noNode(err)
		})
		if err != nil {
			return nil, err
		}
		for _, enc := range names {
			name, err := url.PathUnescape(enc)
			if err != nil {
				continue // not a directory of ours
			}
			refs = append(refs, listing.Ref{Kind: k, Name: name})
		}
	}
	return listing.Inspect(ctx, refs, b.Inspect)
}

// Inspect reads the queue of one name and works out who holds, by the
// rules the waiters follow.
func (b *backend) Inspect(ctx context.Context, kind baton.Kind, name string) (baton.Info, error) {
	if kind == baton.KindQueue {
		return b.inspectQueue(ctx, name)
	}
	info := baton.Info{Name: name, Kind: kind, Backend: b.Kind(), Holders: []baton.Holder{}}
	dir := b.dir(kind, name)
	type read struct {
		capData []byte
		es      []entry
		stats   []*zk.Stat
		data    [][]byte
		lastTok int64
	}
	r, err := req(b, ctx, func() (read, error) {
		var r read
		var err error
		r.capData, _, err = b.c.Get(dir)
		if err != nil {
			return r, err
		}
		names, qs, err := b.c.Children(dir + "/q")
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return r, err
		}
		if qs != nil {
			r.lastTok = qs.Mzxid
		}
		for _, e := range parseQueue(names) {
			data, st, err := b.c.Get(dir + "/q/" + e.name)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return r, err
			}
			r.es, r.stats, r.data = append(r.es, e), append(r.stats, st), append(r.data, data)
		}
		return r, nil
	})
	if errors.Is(err, zk.ErrNoNode) {
		return info, fmt.Errorf("%s %q: %w", kind, name, fs.ErrNotExist)
	}
	if err != nil {
		return info, err
	}
	info.Detail = dir
	// A Mutex's tokens are scaled (pass.go); a pass is not recorded on the
	// server, so a holder shows the token it acquired with.
	token := func(zxid int64) baton.Token {
		if kind == baton.KindMutex {
			return baton.Token(mutexToken(uint64(zxid), 0))
		}
		return baton.Token(zxid)
	}
	info.LastToken = token(r.lastTok)
	holder := func(i int, mode string, n int64) baton.Holder {
		st := r.stats[i]
		// The node's id begins with the id of the Backend that made it.
		owner, _, _ := strings.Cut(idOf(r.es[i].name), ".")
		return baton.Holder{Owner: owner, Since: time.UnixMilli(st.Ctime).UTC(), Token: token(st.Czxid), Mode: mode, N: n}
	}
	held := 0
	switch kind {
	case baton.KindMutex:
		if len(r.es) > 0 {
			info.Holders, held = append(info.Holders, holder(0, "exclusive", 0)), 1
		}
	case baton.KindRWMutex:
		// Readers up to the first writer hold; a writer holds when it
		// is first.
		for i, e := range r.es {
			if e.tag == 'w' && string(r.data[i]) != string(downgraded) {
				if i == 0 {
					info.Holders, held = append(info.Holders, holder(0, "exclusive", 0)), 1
				}
				break
			}
			info.Holders, held = append(info.Holders, holder(i, "shared", 0)), held+1
		}
	case baton.KindSemaphore:
		info.Capacity, _ = strconv.ParseInt(string(r.capData), 10, 64)
		var sum int64
		for i := range r.es {
			k, _ := strconv.ParseInt(string(r.data[i]), 10, 64)
			if sum += k; sum > info.Capacity {
				break
			}
			info.Holders, held = append(info.Holders, holder(i, "", k)), held+1
		}
	}
	info.Waiters = len(r.es) - held
	return info, nil
}

// Remove deletes a name's nodes, newest first, its queue and its
// directory. Waiters return ErrLost; holders learn it when they give their
// hold back (ErrLost): a hold does not watch its own node, which would
// cost every acquisition a request.
func (b *backend) Remove(ctx context.Context, kind baton.Kind, name string) error {
	if kind == baton.KindQueue {
		return b.removeQueue(ctx, name)
	}
	dir := b.dir(kind, name)
	_, err := req(b, ctx, func() (struct{}, error) {
		for {
			names, _, err := b.c.Children(dir + "/q")
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return struct{}{}, err
			}
			// Newest first: a waiter whose predecessor goes must not
			// find itself first in the queue.
			es := parseQueue(names)
			for i := len(es) - 1; i >= 0; i-- {
				if err := noNode(b.c.Delete(dir+"/q/"+es[i].name, -1)); err != nil {
					return struct{}{}, err
				}
			}
			err = noNode(b.c.Delete(dir+"/q", -1))
			if errors.Is(err, zk.ErrNotEmpty) {
				continue // a node came meanwhile
			}
			if err != nil {
				return struct{}{}, err
			}
			return struct{}{}, b.c.Delete(dir, -1)
		}
	})
	if errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("%s %q: %w", kind, name, fs.ErrNotExist)
	}
	return err
}

var _ baton.Inspector = (*backend)(nil)
