//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/batonlock/baton/cluster/etcdlock"
	"github.com/batonlock/baton/cluster/lease"
)

// The etcd failover table: a worker process holds the mutex of a name and
// is SIGKILLed while a waiter of this process is queued; the time from
// the kill to the waiter holding is measured. Nobody revokes the dead
// holder's lease: it ends a TTL after the holder's last renewal, etcd
// deletes its keys at the next pass of its expired-lease loop (every
// 500 ms), and the waiter is then handed the name. That sum is the
// server's limit for a leader's failover, the same for every client.

// etcdKillTTL is the lease of both holders and waiters: the shortest a
// one-member server grants as asked.
const etcdKillTTL = 2 * time.Second

// etcdKillBound is the goal of the table: the TTL, one pass of etcd's
// expired-lease loop, and a tenth of a second for the handoff.
const etcdKillBound = etcdKillTTL + 500*time.Millisecond + 100*time.Millisecond

// etcdKillMutex opens the mutex of key for subject (its table name) on a
// client of its own, with etcdKillTTL leases.
func etcdKillMutex(subject, addr, key string) (mutexH, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	switch subject {
	case "etcd concurrency":
		s, err := concurrency.NewSession(c, concurrency.WithTTL(int(etcdKillTTL/time.Second)))
		if err != nil {
			c.Close()
			return nil, err
		}
		return ownClient{etcdH{s: s, m: concurrency.NewMutex(s, "/etcdkill/"+key)}, c}, nil
	case "baton etcd":
		b, err := etcdlock.New(c, lease.WithTTL(etcdKillTTL), lease.WithPrefix("etcdkill"))
		if err != nil {
			c.Close()
			return nil, err
		}
		m, err := b.Mutex(context.Background(), key)
		if err != nil {
			b.Close()
			c.Close()
			return nil, err
		}
		return ownClient{batonClient{batonMutex{m}, b}, c}, nil
	}
	c.Close()
	return nil, fmt.Errorf("no etcd failover of %s", subject)
}

// ownClient closes the client its mutex was opened on after the mutex.
type ownClient struct {
	mutexH
	c *clientv3.Client
}

func (o ownClient) close() error { return errors.Join(o.mutexH.close(), o.c.Close()) }

// etcdHoldWorker locks a.Key for a.Subject on the server at a.Addr, says
// "held" and keeps the lock until stdin closes or the process is killed.
func etcdHoldWorker(a workerArgs, in io.Reader) error {
	ctx := context.Background()
	h, err := etcdKillMutex(a.Subject, a.Addr, a.Key)
	if err != nil {
		return err
	}
	defer h.close()
	if err := h.lock(ctx); err != nil {
		return err
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, in)
	return h.unlock(ctx)
}

// etcdKillGrant measures, n times, the time from SIGKILL of a worker
// holding key to a waiter of this process holding it.
func etcdKillGrant(ctx context.Context, s *subject, addr, key string, n int) (sample, error) {
	w, err := etcdKillMutex(s.name, addr, key)
	if err != nil {
		return sample{}, err
	}
	defer w.close()
	var h hist
	for range n {
		// The waiter is queued by then: its request is one round trip on
		// loopback, and a late one would only be granted sooner.
		d, err := killRound(ctx, workerArgs{Role: "etcd-hold", Subject: s.name, Key: key, Addr: addr}, w.lock, 50*time.Millisecond, 10*etcdKillTTL)
		if err != nil {
			return sample{}, err
		}
		h.add(d)
		if err := w.unlock(ctx); err != nil {
			return sample{}, err
		}
	}
	return sample{Ops: int64(n), P50: h.quantile(0.5), P99: h.quantile(0.99), Max: h.max, WorstWait: h.max}, nil
}

// etcdKillTable is the etcd failover table of subs ("baton etcd" and
// "etcd concurrency").
func etcdKillTable(sec, addr string, kills int, subs []*subject) *plannedTable {
	subs = pick(subs, func(s *subject) bool { return s.name == "baton etcd" || s.name == "etcd concurrency" })
	t := newPlanned("etcd-kill", sec, fmt.Sprintf("etcd mutex holder SIGKILLed (%v leases): kill to a waiter in another process holding", etcdKillTTL), "latency", "mutex",
		[]string{"etcd concurrency"}, subs, func(ctx context.Context, s *subject) (sample, error) {
			return etcdKillGrant(ctx, s, addr, "kill", kills)
		})
	t.extra = time.Duration(kills) * 10 * etcdKillTTL
	return t
}
