//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/cluster/etcdlock"
	"github.com/batonlock/baton/cluster/zklock"
	"github.com/go-zookeeper/zk"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The etcd and ZooKeeper floors: a job is a key (a sequential znode), and
// a claim finds the oldest, reads its payload and deletes it, guarded by
// its revision (its existence) against another client taking it.

const etcdFloorDesc = "a Put of the job key; a Get of the oldest key (by create revision) under the prefix, with its value; a Txn deleting it if its mod revision is unchanged"

var etcdFloorSeq atomic.Int64

type etcdFloor struct {
	c      *clientv3.Client
	prefix string
	me     string // this client's part of its keys
	n      int
}

func (e *etcdFloor) key() string {
	e.n++
	return fmt.Sprintf("%s%s-%016x", e.prefix, e.me, e.n)
}

func (e *etcdFloor) put(ctx context.Context, n int) error {
	if n == 1 {
		_, err := e.c.Put(ctx, e.key(), string(dbqPayload))
		return err
	}
	ops := make([]clientv3.Op, n)
	for i := range ops {
		ops[i] = clientv3.OpPut(e.key(), string(dbqPayload))
	}
	_, err := e.c.Txn(ctx).Then(ops...).Commit()
	return err
}

// oldest reads the oldest job with its value; with none it waits a
// moment and returns nil.
func (e *etcdFloor) oldest(ctx context.Context) (*mvccpb.KeyValue, error) {
	r, err := e.c.Get(ctx, e.prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return nil, err
	}
	if len(r.Kvs) == 0 {
		return nil, sleepCtx(ctx, time.Millisecond)
	}
	return r.Kvs[0], nil
}

func (e *etcdFloor) claimAck(ctx context.Context) error {
	for {
		kv, err := e.oldest(ctx)
		if err != nil {
			return err
		}
		if kv == nil {
			continue
		}
		t, err := e.c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).Commit()
		if err != nil {
			return err
		}
		if t.Succeeded {
			return nil
		}
	}
}

func (e *etcdFloor) close() error { return nil }

// etcdQueues returns the etcd queue rows, the floor first.
func etcdQueues(ctx context.Context, de *dbEnv, ce *clusterEnv) []*dbqSubject {
	const floor, bn = etcdFloorName, "baton etcd"
	if ce.etcdC == nil {
		err := errors.New("etcd: the server did not start")
		return etcdFailing(err)
	}
	c := ce.etcdC
	b, err := etcdlock.New(c)
	if err != nil {
		return etcdFailing(fmt.Errorf("etcd queues: %w", err))
	}
	de.closers = append(de.closers, b.Close)
	raw := &dbqSubject{s: &subject{name: floor, id: "rawetcdq", kind: "etcd"},
		open: func(ctx context.Context, queue string) (dbqClient, error) {
			return &etcdFloor{c: c, prefix: "/bench-queue-floor/" + queue + "/", me: strconv.FormatInt(etcdFloorSeq.Add(1), 16)}, nil
		}}
	leased := &dbqSubject{s: &subject{name: etcdLeasedName, id: "leasedetcdq", kind: "etcd"},
		open: func(ctx context.Context, queue string) (dbqClient, error) { return newEtcdLeased(ctx, c, queue) }}
	subs := []*dbqSubject{raw, dbqBatonSubject(bn, "betcdq", "etcd", b), leased}
	for _, s := range subs {
		open := s.open
		s.open = func(ctx context.Context, queue string) (dbqClient, error) {
			if err := compactEtcd(ctx, c); err != nil {
				return nil, err
			}
			return open(ctx, queue)
		}
	}
	return subs
}

// compactEtcd compacts the server's history up to now. A range read
// walks the keys deleted in its range until a compaction drops them, so
// without one every job done before, by any subject and repetition,
// would slow the reads of the next: a server in service compacts on a
// schedule (etcd's --auto-compaction-*), and each run starts as one just
// compacted.
func compactEtcd(ctx context.Context, c *clientv3.Client) error {
	r, err := c.Get(ctx, "compact", clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	// The opens of one workers' run come with no write between them: one
	// compaction serves them all (the server refuses a second one at the
	// same revision, and the client logs each refusal).
	rev := r.Header.Revision
	if etcdCompacted.Load() >= rev {
		return nil
	}
	if _, err := c.Compact(ctx, rev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("compacting etcd: %w", err)
	}
	etcdCompacted.Store(rev)
	return nil
}

// etcdCompacted is the revision of the last compaction compactEtcd made.
var etcdCompacted atomic.Int64

func etcdFailing(err error) []*dbqSubject {
	return []*dbqSubject{dbqFailing(etcdFloorName, "rawetcdq", "etcd", false, err), dbqFailing("baton etcd", "betcdq", "etcd", true, err),
		dbqFailing(etcdLeasedName, "leasedetcdq", "etcd", false, err)}
}

const zkFloorDesc = "a sequential create of the job znode; getChildren, a get of the oldest child's data, and its delete"

type zkFloor struct {
	c   *zk.Conn
	dir string
	acl []zk.ACL
}

func (z *zkFloor) put(ctx context.Context, n int) error {
	if n == 1 {
		_, err := z.c.Create(z.dir+"/job-", dbqPayload, zk.FlagSequence, z.acl)
		return err
	}
	ops := make([]any, n)
	for i := range ops {
		ops[i] = &zk.CreateRequest{Path: z.dir + "/job-", Data: dbqPayload, Acl: z.acl, Flags: zk.FlagSequence}
	}
	_, err := z.c.Multi(ops...)
	return err
}

func (z *zkFloor) claimAck(ctx context.Context) error {
	for {
		kids, _, err := z.c.Children(z.dir)
		if err != nil {
			return err
		}
		slices.Sort(kids) // sequence numbers of one width sort as text
		for _, k := range kids {
			p := z.dir + "/" + k
			if _, _, err := z.c.Get(p); errors.Is(err, zk.ErrNoNode) {
				continue
			} else if err != nil {
				return err
			}
			if err := z.c.Delete(p, -1); errors.Is(err, zk.ErrNoNode) {
				continue
			} else if err != nil {
				return err
			}
			return nil
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return err
		}
	}
}

func (z *zkFloor) close() error { z.c.Close(); return nil }

// zkQueues returns the ZooKeeper queue rows, the floor first.
func (de *dbEnv) zkQueues(ctx context.Context) []*dbqSubject {
	const floor, bn = "raw sequential znodes", "baton zklock"
	fail := func(err error) []*dbqSubject {
		err = fmt.Errorf("zookeeper queues: %w", err)
		return []*dbqSubject{dbqFailing(floor, "rawzkq", "zookeeper", false, err), dbqFailing(bn, "bzkq", "zookeeper", true, err),
			dbqFailing(zkLeasedName, "leasedzkq", "zookeeper", false, err)}
	}
	s, err := de.server(ctx, "zookeeper", "zookeeper")
	if err != nil {
		return fail(err)
	}
	b, err := zklock.OpenURL(ctx, "zk://"+s.addr+"/baton-bench-queues")
	if err != nil {
		return fail(err)
	}
	de.closers = append(de.closers, b.Close)
	acl := zk.WorldACL(zk.PermAll)
	raw := &dbqSubject{s: &subject{name: floor, id: "rawzkq", kind: "zookeeper"},
		open: func(ctx context.Context, queue string) (dbqClient, error) {
			c, err := zkConnect(s.addr)
			if err != nil {
				return nil, err
			}
			dir := "/bench-queue-floor/" + queue
			for _, p := range []string{"/bench-queue-floor", dir} {
				if _, err := c.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
					c.Close()
					return nil, err
				}
			}
			return &zkFloor{c: c, dir: dir, acl: acl}, nil
		}}
	leased := &dbqSubject{s: &subject{name: zkLeasedName, id: "leasedzkq", kind: "zookeeper"},
		open: func(ctx context.Context, queue string) (dbqClient, error) { return newZKLeased(s.addr, queue, acl) }}
	return []*dbqSubject{raw, dbqBatonSubject(bn, "bzkq", "zookeeper", b), leased}
}
