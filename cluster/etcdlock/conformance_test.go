package etcdlock

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
	"github.com/batonlock/baton/locktest"
)

// The suites' cfg is an etcd:// URL with a key prefix of its own.

func openSuite(cfg string) (baton.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return OpenURL(ctx, cfg, lease.WithTTL(2*time.Second))
}

// suiteObjects lists the keys under the URL's prefix.
func suiteObjects(cfg string) ([]string, error) {
	t, err := parseURL(cfg)
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: t.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return keys(ctx, c, t.prefix)
}

var caps = locktest.Caps{
	RWMutex: true, Semaphore: true, Cond: true, Value: true,
	CrossProcess: true,
	Queue:        true,
	KillBound:    6 * time.Second, // TTL 2 s, granted up to the server's minimum
	Acquisitions: 2000,
	Lease:        true,
	// A cancelled waiter returns once the delete of its queue key has
	// committed, so that nothing of it can be granted later: one consensus
	// write, a few ms on an idle cluster, bounded by the driver's 500 ms
	// cleanup timeout (after which the delete goes on in the background).
	CancelBound: 500 * time.Millisecond,
}

// caps3 lowers the cross-process count for the 3-member cluster, where
// every write is replicated: the same checks, in half the time.
func caps3() locktest.Caps {
	c := caps
	c.Acquisitions = 1000
	return c
}

var (
	suite1 = locktest.Suite{Name: "etcd1", Open: openSuite, Caps: caps, Objects: suiteObjects, KillSession: killSession,
		// A semaphore keeps its capacity key: open handles take its
		// deletion for Remove.
		Reclaim: &locktest.Reclaim{NoSemaphore: true, Residue: func(cfg string) (int, error) {
			ks, err := suiteObjects(cfg)
			return len(ks), err
		}}}
	suite3 = locktest.Suite{Name: "etcd3", Open: openSuite, Caps: caps3(), Objects: suiteObjects, KillSession: killSession,
		RunElsewhere: map[string]string{
			"Queue/Hammer":        "the queue's load test runs on one member (TestOneMember); the cluster's faults are TestMemberFaults/QueueLeaderKill",
			"Queue/KillClaimants": "the queue's kill test runs on one member (TestOneMember); the cluster's faults are TestMemberFaults/QueueLeaderKill",
		}}
)

func TestMain(m *testing.M) {
	if js := os.Getenv(envMember); js != "" {
		os.Exit(runMember(js))
	}
	locktest.Main(m, suite1, suite3)
}

// checkEmpty checks that no lock key is left under prefix (semaphore
// capacity keys stay by design).
func checkEmpty(t *testing.T, c *cluster, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ks, err := keys(ctx, c.client(t), prefix)
	if err != nil {
		t.Fatalf("keys: %v", err)
	}
	for _, k := range ks {
		if strings.Contains(k, "/q/") || strings.Contains(k, "/w/") {
			t.Errorf("key left behind: %s", k)
		}
	}
}
