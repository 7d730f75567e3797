package etcdlock

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/internal/listing"
	"github.com/batonlock/baton/cluster/lease"
)

// object gathers the keys of one named object read from etcd.
type object struct {
	kind     baton.Kind
	name     string
	capacity int64               // semaphores; -1 when the capacity key is missing
	queue    []*mvccpb.KeyValue  // q/ keys
	writers  map[string]struct{} // ids with a w/ marker
}

func validKind(k baton.Kind) bool {
	switch k {
	case baton.KindMutex, baton.KindRWMutex, baton.KindSemaphore, baton.KindCond:
		return true
	}
	return false
}

// parseKey splits a key under the prefix into kind, name and the rest ("" for
// a semaphore's capacity key, "q/<id>" or "w/<id>").
func (b *backend) parseKey(key string) (kind baton.Kind, name, rest string, ok bool) {
	s, ok := strings.CutPrefix(key, b.o.prefix)
	if !ok {
		return "", "", "", false
	}
	k, s, ok := strings.Cut(s, "/")
	if !ok || !validKind(baton.Kind(k)) {
		return "", "", "", false
	}
	enc, rest, _ := strings.Cut(s, "/")
	return baton.Kind(k), decodeName(enc), rest, enc != ""
}

func (b *backend) collect(kvs []*mvccpb.KeyValue) map[[2]string]*object {
	objs := make(map[[2]string]*object)
	get := func(kind baton.Kind, name string) *object {
		k := [2]string{string(kind), name}
		o := objs[k]
		if o == nil {
			o = &object{kind: kind, name: name, capacity: -1, writers: map[string]struct{}{}}
			objs[k] = o
		}
		return o
	}
	for _, kv := range kvs {
		kind, name, rest, ok := b.parseKey(string(kv.Key))
		if !ok {
			continue
		}
		o := get(kind, name)
		switch {
		case rest == "" && kind == baton.KindSemaphore:
			if c, err := strconv.ParseInt(string(kv.Value), 10, 64); err == nil {
				o.capacity = c
			}
		case strings.HasPrefix(rest, "q/"):
			o.queue = append(o.queue, kv)
		case strings.HasPrefix(rest, "w/"):
			o.writers[rest[2:]] = struct{}{}
		}
	}
	return objs
}

// info tells which keys hold by the rules the drivers wait by.
func (b *backend) info(ctx context.Context, o *object, ttls map[int64]time.Duration) baton.Info {
	slices.SortFunc(o.queue, func(x, y *mvccpb.KeyValue) int { return cmp.Compare(x.CreateRevision, y.CreateRevision) })
	in := baton.Info{
		Name: o.name, Kind: o.kind, Backend: b.Kind(), Impl: "lease", Holders: []baton.Holder{},
		Detail: b.dir(o.kind, o.name),
	}
	if o.kind == baton.KindSemaphore && o.capacity > 0 {
		in.Capacity = o.capacity
	}
	var used int64
	writerSeen := false
	for i, kv := range o.queue {
		h := parseHolder(kv.Value)
		holds := false
		switch o.kind {
		case baton.KindMutex:
			holds = i == 0
		case baton.KindRWMutex:
			_, w := o.writers[strings.TrimPrefix(string(kv.Key), b.dir(o.kind, o.name)+"q/")]
			holds = (w && i == 0) || (!w && !writerSeen)
			writerSeen = writerSeen || w
		case baton.KindSemaphore:
			n := max(h.N, 1)
			used += n
			holds = o.capacity > 0 && used <= o.capacity
		}
		if !holds {
			in.Waiters++
			continue
		}
		if _, ok := ttls[kv.Lease]; !ok && kv.Lease != 0 {
			ttls[kv.Lease] = -1
			if r, err := b.c.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil && r.TTL > 0 {
				ttls[kv.Lease] = time.Duration(r.TTL) * time.Second
			}
		}
		tok := baton.Token(kv.CreateRevision)
		if o.kind == baton.KindMutex {
			// The token the key was granted with; a hold passed among the
			// handles of its Backend has a higher one (pass.go).
			tok = baton.Token(mutexToken(kv.CreateRevision, 0))
		}
		hd := baton.Holder{PID: h.PID, Host: h.Host, Since: h.Since, Token: tok, Mode: h.Mode, N: h.N}
		if t := ttls[kv.Lease]; t > 0 {
			hd.TTL = t
		}
		in.Holders = append(in.Holders, hd)
	}
	return in
}

// List returns every object under the backend's prefix, queues included.
func (b *backend) List(ctx context.Context) ([]baton.Info, error) {
	rctx, cancel := b.rctx(ctx)
	defer cancel()
	resp, err := b.c.Get(rctx, b.o.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, lease.CtxErr(ctx, err)
	}
	ttls := map[int64]time.Duration{}
	var out []baton.Info
	for _, o := range b.collect(resp.Kvs) {
		out = append(out, b.info(rctx, o, ttls))
	}
	keys := make([][]byte, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		keys[i] = kv.Key
	}
	qs, err := listing.Inspect(ctx, b.queueNames(keys), func(ctx context.Context, _ baton.Kind, name string) (baton.Info, error) {
		return b.inspectQueue(ctx, name) // queue_inspect.go
	})
	if err != nil {
		return nil, err
	}
	out = append(out, qs...)
	slices.SortFunc(out, func(x, y baton.Info) int {
		return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.Kind, y.Kind))
	})
	return out, nil
}

func (b *backend) checkObject(kind baton.Kind, name string) error {
	if kind == baton.KindChannel {
		// etcd serves no channels: callers that ask every kind (baton
		// status) pass over them.
		return fmt.Errorf("%w: the etcd Inspector shows no %s", baton.ErrUnsupported, kind)
	}
	if !validKind(kind) && kind != baton.KindQueue {
		return refused("kind %q", kind)
	}
	return baton.ValidateName(name)
}

// objectOps returns one operation per key range of an object: its
// directory, and for a semaphore its capacity key too.
func (b *backend) objectOps(kind baton.Kind, name string, op func(string, ...clientv3.OpOption) clientv3.Op) []clientv3.Op {
	dir := b.dir(kind, name)
	ops := []clientv3.Op{op(dir, clientv3.WithPrefix())}
	if kind == baton.KindSemaphore {
		ops = append(ops, op(strings.TrimSuffix(dir, "/")))
	}
	return ops
}

// Inspect returns one object; fs.ErrNotExist when it has no key.
func (b *backend) Inspect(ctx context.Context, kind baton.Kind, name string) (baton.Info, error) {
	if err := b.checkObject(kind, name); err != nil {
		return baton.Info{}, err
	}
	if kind == baton.KindQueue {
		return b.inspectQueue(ctx, name)
	}
	rctx, cancel := b.rctx(ctx)
	defer cancel()
	resp, err := b.c.Txn(rctx).Then(b.objectOps(kind, name, clientv3.OpGet)...).Commit()
	if err != nil {
		return baton.Info{}, lease.CtxErr(ctx, err)
	}
	var kvs []*mvccpb.KeyValue
	for _, r := range resp.Responses {
		kvs = append(kvs, r.GetResponseRange().Kvs...)
	}
	o := b.collect(kvs)[[2]string{string(kind), name}]
	if o == nil {
		return baton.Info{}, fs.ErrNotExist
	}
	return b.info(rctx, o, map[int64]time.Duration{}), nil
}

// Remove deletes every key of the object (of a queue: its jobs, claims,
// dead letters and id sequence). Holders see their loss fire: those
// of this Backend before Remove returns, others when the delete reaches the
// watch of their key (holdwatch.go); their Unlock returns ErrLost. Waiters
// get ErrLost when they next read their queue.
func (b *backend) Remove(ctx context.Context, kind baton.Kind, name string) error {
	if err := b.checkObject(kind, name); err != nil {
		return err
	}
	rctx, cancel := b.rctx(ctx)
	defer cancel()
	resp, err := b.c.Txn(rctx).Then(b.objectOps(kind, name, clientv3.OpDelete)...).Commit()
	if err != nil {
		return lease.CtxErr(ctx, err)
	}
	var deleted int64
	for _, r := range resp.Responses {
		deleted += r.GetResponseDeleteRange().Deleted
	}
	if deleted == 0 {
		return fs.ErrNotExist
	}
	if s := b.cur.Load(); s != nil {
		s.removed(b.dir(kind, name), resp.Header.Revision)
	}
	return nil
}
