package zklock

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/locktest"
)

// The suite's cfg is a zk:// URL with a prefix of its own; helper
// processes open the same URL.

func openSuite(cfg string) (baton.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return OpenURL(ctx, cfg)
}

// connect dials addrs for a test and closes the connection when it ends.
func connect(t testing.TB, addrs []string, timeout time.Duration) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(addrs, timeout, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// tree lists every node under root, depth first.
func tree(c *zk.Conn, root string) ([]string, error) {
	kids, _, err := c.Children(root)
	if err == zk.ErrNoNode {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range kids {
		p := root + "/" + k
		out = append(out, p)
		sub, err := tree(c, p)
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

// suiteObjects lists the nodes under the URL's prefix.
func suiteObjects(cfg string) ([]string, error) {
	t, err := parseURL(cfg)
	if err != nil {
		return nil, err
	}
	o, err := buildConfig(t.opts)
	if err != nil {
		return nil, err
	}
	c, _, err := zk.Connect(t.servers, 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return tree(c, o.Prefix)
}

var caps = locktest.Caps{
	RWMutex: true, Semaphore: true, Cond: true, Value: true,
	CrossProcess: true,
	Queue:        true,
	KillBound:    5 * time.Second, // session timeout 2 s
	Acquisitions: 2000,
	Lease:        true,
	// A cancelled waiter returns at once; its node is deleted after.
	CancelBound: 200 * time.Millisecond,
	// A claim lists every waiting job (ZooKeeper reads a directory only
	// whole; see the package doc): the kill test's jobs flow through a
	// backlog of this many rather than all waiting from the start.
	QueueWaiting: 2000,
}

var suite = locktest.Suite{Name: "zk", Open: openSuite, Caps: caps, Objects: suiteObjects,
	Reclaim: &locktest.Reclaim{Residue: residue}}

// residue counts the znodes of names under the URL's prefix: those below
// the directory of each kind, which stay (one per kind).
func residue(cfg string) (int, error) {
	ns, err := suiteObjects(cfg)
	if err != nil {
		return 0, err
	}
	t, err := parseURL(cfg)
	if err != nil {
		return 0, err
	}
	o, err := buildConfig(t.opts)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range ns {
		if strings.Count(strings.TrimPrefix(p, o.Prefix), "/") >= 2 {
			n++
		}
	}
	return n, nil
}

func TestMain(m *testing.M) { locktest.Main(m, suite) }

func suiteURL(addr, name string) string {
	return fmt.Sprintf("zk://%s/lt-%d-%s?ttl=2s", addr, os.Getpid(), name)
}

func TestConformance(t *testing.T) {
	addr := standalone(t)
	locktest.Run(t, suite, suiteURL(addr, "standalone"))
	// Nothing but the persistent directories may be left.
	left, err := suiteObjects(suiteURL(addr, "standalone"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range left {
		if i := strings.LastIndex(p, "/q/"); i >= 0 {
			t.Errorf("node left behind: %s", p)
		}
	}
}
