package zkfence_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/zkfence"
	"github.com/batonlock/baton/cluster/zklock"
	"github.com/batonlock/baton/fence"
	"github.com/batonlock/baton/internal/servers"
)

var (
	srvOnce sync.Once
	srvURL  string
	srvStop func()
	srvErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if srvStop != nil {
		srvStop()
	}
	os.Exit(code)
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// server starts one standalone ZooKeeper for the package's tests (TestMain
// stops it) and returns its zk:// URL and a connection to it.
func server(t *testing.T) (string, *zk.Conn) {
	t.Helper()
	srvOnce.Do(func() { srvURL, srvStop, srvErr = servers.Serve(servers.ZooKeeper) })
	if srvErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("zookeeper: %v", srvErr)
		}
		t.Skipf("zookeeper: %v", srvErr)
	}
	addr := strings.TrimPrefix(srvURL, "zk://")
	addr = addr[:strings.IndexByte(addr, '/')]
	// A session that does not come is asked for again on a new
	// connection, a few times.
	for try := 1; ; try++ {
		c, ev, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.After(15 * time.Second)
		for c.State() != zk.StateHasSession {
			select {
			case <-ev:
				continue
			case <-deadline:
			}
			break
		}
		if c.State() == zk.StateHasSession {
			t.Cleanup(c.Close)
			return srvURL, c
		}
		c.Close()
		if try == 4 {
			t.Fatalf("no ZooKeeper session in %d tries: %v", try, c.State())
		}
	}
}

func newFence(t *testing.T, c *zk.Conn, path string) *zkfence.Fence {
	t.Helper()
	f, err := zkfence.New(c, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func create(t *testing.T, c *zk.Conn, path string) {
	t.Helper()
	if _, err := c.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
}

func get(t *testing.T, c *zk.Conn, path string) string {
	t.Helper()
	b, _, err := c.Get(path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	return string(b)
}

func TestFencedWrites(t *testing.T) {
	ctx := context.Background()
	_, c := server(t)
	create(t, c, "/w")
	create(t, c, "/w/res")
	f := newFence(t, c, "/w/fence")
	for _, p := range []string{"", "/", "rel", "/trailing/"} {
		if _, err := zkfence.New(c, p, nil); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("New(%q): %v", p, err)
		}
	}
	if err := f.Set(ctx, 0, "/w/res", []byte("x")); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("Set with token 0: %v", err)
	}
	if _, err := f.Do(ctx, 3, "SET"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("Do with no multi operation: %v", err)
	}
	if h, err := f.Highest(ctx); h != 0 || err != nil {
		t.Fatalf("Highest before any write, or after refused ones: %d, %v", h, err)
	}
	if err := f.Set(ctx, 5, "/w/res", []byte("five")); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(ctx, 5, "/w/res", []byte("five again")); err != nil {
		t.Errorf("the same holder writing twice: %v", err)
	}
	err := f.Set(ctx, 4, "/w/res", []byte("stale"))
	var se *fence.StaleError
	if !errors.Is(err, fence.ErrStale) || !errors.Is(err, baton.ErrLost) || !errors.As(err, &se) ||
		se.Token != 4 || se.Highest != 5 {
		t.Errorf("Set with 4 after 5: %v, want StaleError{4, 5}", err)
	}
	if v := get(t, c, "/w/res"); v != "five again" {
		t.Errorf("/w/res = %q after a stale write", v)
	}
	// Several operations in one fenced multi, all or none.
	acl := zk.WorldACL(zk.PermAll)
	if _, err := f.Do(ctx, 6, &zk.CreateRequest{Path: "/w/a", Data: []byte("1"), Acl: acl},
		&zk.DeleteRequest{Path: "/w/res", Version: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Do(ctx, 5, &zk.SetDataRequest{Path: "/w/a", Data: []byte("stale"), Version: -1}); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Do with 5 after 6: %v", err)
	}
	// An operation that fails leaves the fence as it was.
	if err := f.Set(ctx, 7, "/w/missing", []byte("x")); !errors.Is(err, zk.ErrNoNode) {
		t.Errorf("Set of a missing node: %v", err)
	}
	if get(t, c, "/w/a") != "1" {
		t.Errorf("a stale Do changed /w/a")
	}
	if h, err := f.Highest(ctx); h != 6 || err != nil {
		t.Errorf("Highest: %d, %v; want 6", h, err)
	}
	// A fence node whose parent is missing is reported, not retried.
	g := newFence(t, c, "/nowhere/fence")
	if err := g.Set(ctx, 1, "/w/a", nil); !errors.Is(err, zk.ErrNoNode) {
		t.Errorf("a fence under a missing parent: %v", err)
	}
}

// TestLargeTokens: tokens past 2^53 (ZooKeeper's zxids grow there).
func TestLargeTokens(t *testing.T) {
	ctx := context.Background()
	_, c := server(t)
	create(t, c, "/big")
	f := newFence(t, c, "/big-fence")
	for _, tok := range []baton.Token{9, 10, 1<<53 + 2, 1<<63 + 1, 1<<64 - 2} {
		if err := f.Set(ctx, tok, "/big", []byte(strconv.FormatUint(uint64(tok), 10))); err != nil {
			t.Fatalf("Set(%d): %v", tok, err)
		}
		if err := f.Set(ctx, tok-1, "/big", []byte("stale")); !errors.Is(err, fence.ErrStale) {
			t.Errorf("Set(%d) after %d: %v, want ErrStale", tok-1, tok, err)
		}
	}
}

// TestStaleHolder: a holder whose lock was taken over (here: released
// behind its back, as an expired session releases it) is refused once the
// newer holder has written, though it never learnt of its loss.
func TestStaleHolder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, c := server(t)
	open := func() baton.Mutex {
		b, err := zklock.OpenURL(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		m, err := b.Mutex(ctx, "stale-holder")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := open(), open()
	create(t, c, "/sh")
	f := newFence(t, c, "/sh-fence")
	ha, err := a.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Set(ctx, ha.Token(), "/sh", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	hb, err := b.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hb.Token() <= ha.Token() {
		t.Fatalf("tokens %d then %d", ha.Token(), hb.Token())
	}
	if err := f.Set(ctx, hb.Token(), "/sh", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(ctx, ha.Token(), "/sh", []byte("a, late")); !errors.Is(err, fence.ErrStale) {
		t.Errorf("the paused holder's write: %v, want ErrStale", err)
	}
	if v := get(t, c, "/sh"); v != "b" {
		t.Errorf("/sh = %q", v)
	}
}

// TestHammer: goroutines on two connections create sequential log nodes
// through one fence, with tokens that others sometimes overtake; the
// accepted writes must come out in non-decreasing token order.
func TestHammer(t *testing.T) {
	const goroutines, per = 8, 40
	ctx := context.Background()
	_, c1 := server(t)
	_, c2 := server(t)
	create(t, c1, "/log")
	var next, accepted, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range goroutines {
		f := newFence(t, []*zk.Conn{c1, c2}[i%2], "/log-fence")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				n := next.Add(1)
				if rand.IntN(3) == 0 {
					n -= int64(rand.IntN(goroutines))
				}
				tok := baton.Token(max(1, n))
				_, err := f.Do(ctx, tok, &zk.CreateRequest{Path: "/log/e-", Data: []byte(strconv.FormatUint(uint64(tok), 10)),
					Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagSequence})
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, fence.ErrStale):
					refused.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	kids, _, err := c1.Children("/log")
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(kids)) != accepted.Load() {
		t.Errorf("%d entries, %d accepted writes", len(kids), accepted.Load())
	}
	// Sequence numbers (zero-padded, so sorting the names sorts them)
	// order the entries as they committed.
	slices.Sort(kids)
	tokens := make([]int64, len(kids))
	for i, k := range kids {
		tokens[i], _ = strconv.ParseInt(get(t, c1, "/log/"+k), 10, 64)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] < tokens[i-1] {
			t.Fatalf("entry %d has token %d after %d", i, tokens[i], tokens[i-1])
		}
	}
	if refused.Load() == 0 {
		t.Errorf("no write was refused: the test did not exercise stale tokens")
	}
	t.Logf("%d accepted, %d refused", accepted.Load(), refused.Load())
}
