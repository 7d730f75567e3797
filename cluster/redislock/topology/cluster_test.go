package topology

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton/cluster/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// clusterSet is a Redis Cluster of three masters with a replica each.
type clusterSet struct {
	nodes []*proc
}

var (
	clusterOnce sync.Once
	clusterSet6 *clusterSet
	clusterErr  error
)

// redisCluster returns the package's Cluster, built on first use.
func redisCluster(t *testing.T) *clusterSet {
	t.Helper()
	need(t)
	clusterOnce.Do(func() { clusterSet6, clusterErr = buildCluster() })
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	return clusterSet6
}

func buildCluster() (*clusterSet, error) {
	s := &clusterSet{}
	var addrs []string
	for range 6 {
		p, err := newProc()
		if err != nil {
			return nil, err
		}
		p.args = []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(p.dir, "nodes.conf"),
			"--cluster-node-timeout", "2000"}
		if err := p.start(); err != nil {
			return nil, err
		}
		s.nodes = append(s.nodes, p)
		addrs = append(addrs, p.addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := s.settled(30 * time.Second); err != nil {
		return nil, err
	}
	// Mark every slot as new, as an operator may (redislock's restart
	// check); the replicas get the markers by replication.
	cc := s.client()
	defer cc.Close()
	ctx := context.Background()
	var tags []string
	for i := 0; len(tags) < 16384; i++ {
		tags = appendTag(tags, i)
	}
	if _, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, tag := range tags {
			p.Set(ctx, "baton:alive:{"+tag+"}", "new", 0)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return s, s.replicasOnline(20 * time.Second)
}

// appendTag appends the base-36 form of i to tags when it is the first to
// fall in its slot, as redislock chooses its markers' hash tags.
var slotSeen [16384]bool

func appendTag(tags []string, i int) []string {
	t := strconv.FormatInt(int64(i), 36)
	if sl := slotOf(t); !slotSeen[sl] {
		slotSeen[sl] = true
		tags = append(tags, t)
	}
	return tags
}

// slotOf is the Cluster hash slot of a key without a hash tag.
func slotOf(s string) int {
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
	return int(c % 16384)
}

func (s *clusterSet) client() *redis.ClusterClient {
	var addrs []string
	for _, p := range s.nodes {
		addrs = append(addrs, p.addr())
	}
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
}

func (s *clusterSet) url(query string) string {
	var hs []string
	for _, p := range s.nodes {
		hs = append(hs, p.addr())
	}
	u := "redis+cluster://" + strings.Join(hs, ",")
	if query != "" {
		u += "?" + query
	}
	return u
}

// settled waits until every running node reports cluster_state:ok.
func (s *clusterSet) settled(d time.Duration) error {
	for _, p := range s.nodes {
		if p.cmd == nil {
			continue
		}
		c := p.client()
		err := waitFor(d, "cluster state ok at "+p.addr(), func() (bool, error) {
			info, err := c.ClusterInfo(context.Background()).Result()
			return strings.Contains(info, "cluster_state:ok"), err
		})
		c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// replicasOnline waits until every master counts one replica online.
func (s *clusterSet) replicasOnline(d time.Duration) error {
	for _, p := range s.nodes {
		if p.cmd == nil {
			continue
		}
		c := p.client()
		role, err := infoField(c, "replication", "role")
		c.Close()
		if err != nil {
			return err
		}
		if role == "master" {
			if err := online(p, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodeID returns the Cluster node id of p.
func nodeID(p *proc) (string, error) {
	c := p.client()
	defer c.Close()
	return c.Do(context.Background(), "cluster", "myid").Text()
}

// masterOf returns the node that serves slot as master.
func (s *clusterSet) masterOf(slot int) (*proc, error) {
	cc := s.client()
	defer cc.Close()
	shards, err := cc.ClusterSlots(context.Background()).Result()
	if err != nil {
		return nil, err
	}
	for _, sh := range shards {
		if slot >= sh.Start && slot <= sh.End && len(sh.Nodes) > 0 {
			for _, p := range s.nodes {
				if p.addr() == sh.Nodes[0].Addr {
					return p, nil
				}
			}
			return nil, fmt.Errorf("slot %d served by %s, not a node of the set", slot, sh.Nodes[0].Addr)
		}
	}
	return nil, fmt.Errorf("slot %d is not served", slot)
}

// nameSlot returns the hash slot of a redislock name's keys.
func nameSlot(name string) int { return slotOf(redisnode.EscapeName(name)) }

// failover SIGKILLs the master of slot, waits until its replica serves the
// slot, restarts the killed node (it rejoins as the replica of the new
// master) and waits until the Cluster is whole again.
func (s *clusterSet) failover(slot int) error {
	m, err := s.masterOf(slot)
	if err != nil {
		return err
	}
	m.kill()
	if err := waitFor(30*time.Second, "a replica takes over slot "+strconv.Itoa(slot), func() (bool, error) {
		n, err := s.masterOf(slot)
		return err == nil && n != m, err
	}); err != nil {
		return err
	}
	if err := m.start(); err != nil {
		return err
	}
	if err := s.settled(30 * time.Second); err != nil {
		return err
	}
	return s.replicasOnline(30 * time.Second)
}

// migrate moves slot to another master with its keys, while clients use
// it: IMPORTING and MIGRATING, MIGRATE in batches, then the new owner.
func (s *clusterSet) migrate(slot int) error {
	src, err := s.masterOf(slot)
	if err != nil {
		return err
	}
	var dst *proc
	for _, p := range s.nodes {
		c := p.client()
		role, err := infoField(c, "replication", "role")
		c.Close()
		if err == nil && role == "master" && p != src && p.cmd != nil {
			dst = p
			break
		}
	}
	if dst == nil {
		return errors.New("no other master")
	}
	srcID, err := nodeID(src)
	if err != nil {
		return err
	}
	dstID, err := nodeID(dst)
	if err != nil {
		return err
	}
	ctx := context.Background()
	sc, dc := src.client(), dst.client()
	defer sc.Close()
	defer dc.Close()
	if err := dc.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err(); err != nil {
		return err
	}
	if err := sc.Do(ctx, "cluster", "setslot", slot, "migrating", dstID).Err(); err != nil {
		return err
	}
	for {
		keys, err := sc.ClusterGetKeysInSlot(ctx, slot, 3).Result()
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", "127.0.0.1", dst.port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := sc.Do(ctx, args...).Err(); err != nil && !strings.Contains(err.Error(), "NOKEY") {
			return fmt.Errorf("MIGRATE: %w", err)
		}
		// Leave clients time to meet the slot half moved.
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range s.nodes {
		if p.cmd == nil {
			continue
		}
		c := p.client()
		err := c.Do(ctx, "cluster", "setslot", slot, "node", dstID).Err()
		c.Close()
		if err != nil && p == dst {
			return err
		}
	}
	return waitFor(10*time.Second, "slot "+strconv.Itoa(slot)+" served by its new master", func() (bool, error) {
		n, err := s.masterOf(slot)
		return err == nil && n == dst, err
	})
}

// TestClusterFailoverContention: clients contend on one Mutex while the
// master of its slot is SIGKILLed and its replica takes over; grants wait
// for one replica. No two holds overlap, tokens keep increasing, and
// grants resume once the killed node is back as a replica.
func TestClusterFailoverContention(t *testing.T) {
	s := redisCluster(t)
	const name = "cluster-contended"
	c := contend(t, s.url("ttl=3s&replicas=1"), name, 4)
	c.waitGrants(t, 50, 10*time.Second)
	if err := s.failover(nameSlot(name)); err != nil {
		t.Fatal(err)
	}
	before := c.grants.Load()
	c.waitGrants(t, before+50, 20*time.Second)
	c.finish(t)
}

// TestClusterMigrationContention: the slot of a contended Mutex moves to
// another master, key by key, while clients wait on it, with and without
// replicas to wait for. No hold overlaps another, no Lock call waits until
// its context ends (a waiter stuck on the old node would), and grants go
// on on the new master.
func TestClusterMigrationContention(t *testing.T) {
	s := redisCluster(t)
	for _, q := range []string{"ttl=3s", "ttl=3s&replicas=1"} {
		t.Run(q, func(t *testing.T) {
			name := "migrated-" + strings.ReplaceAll(q, "&", "-")
			c := contend(t, s.url(q), name, 4)
			c.waitGrants(t, 50, 10*time.Second)
			if err := s.migrate(nameSlot(name)); err != nil {
				t.Fatal(err)
			}
			before := c.grants.Load()
			c.waitGrants(t, before+50, 10*time.Second)
			c.finish(t)
			if n := c.timeouts.Load(); n > 0 {
				t.Fatalf("%d Lock calls waited until their context ended", n)
			}
		})
	}
}

// TestClusterMigrationWakeUp: a waiter queued on a slot's old master is
// woken by the release on its new master. The lease is long (a waiter
// checks in every 10 s), so a waiter granted within a few seconds was
// woken by the Pub/Sub message, which the Cluster forwards from the new
// master to whichever node the waiter's Backend subscribed on.
func TestClusterMigrationWakeUp(t *testing.T) {
	s := redisCluster(t)
	for _, q := range []string{"ttl=30s", "ttl=30s&replicas=1"} {
		t.Run(q, func(t *testing.T) {
			name := "wake-" + strings.ReplaceAll(q, "&", "-")
			ctx := context.Background()
			a := mutex(t, open(t, s.url(q)), name)
			b := mutex(t, open(t, s.url(q)), name)
			if _, err := a.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				_, err := b.Lock(lctx)
				got <- err
			}()
			time.Sleep(300 * time.Millisecond) // B queues on the old master
			if err := s.migrate(nameSlot(name)); err != nil {
				t.Fatal(err)
			}
			released := time.Now()
			if err := a.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("waiter granted %v after the release on the new master", time.Since(released))
			case <-time.After(5 * time.Second):
				t.Fatal("waiter not woken within 5 s of the release on the new master (its check-in is every 10 s)")
			}
			if err := b.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
