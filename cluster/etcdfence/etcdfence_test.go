package etcdfence_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/etcdfence"
	"github.com/batonlock/baton/cluster/etcdlock"
	"github.com/batonlock/baton/fence"
	"github.com/batonlock/baton/internal/servers"
)

var (
	srvOnce sync.Once
	srvURL  string
	srvStop = func() {}
	srvErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if srvStop != nil {
		srvStop()
	}
	os.Exit(code)
}

// server starts one embedded etcd for the package's tests; TestMain stops
// it and removes its data.
func server(t *testing.T) (string, *clientv3.Client) {
	t.Helper()
	srvOnce.Do(func() { srvURL, srvStop, srvErr = servers.Serve(servers.Etcd) })
	if srvErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("etcd: %v", srvErr)
		}
		t.Skipf("etcd: %v", srvErr)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{strings.TrimPrefix(srvURL, "etcd://")}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srvURL, c
}

func newFence(t *testing.T, kv clientv3.KV, key string) *etcdfence.Fence {
	t.Helper()
	f, err := etcdfence.New(kv, key)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func get(t *testing.T, c *clientv3.Client, key string) string {
	t.Helper()
	r, err := c.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return ""
	}
	return string(r.Kvs[0].Value)
}

func TestFencedWrites(t *testing.T) {
	ctx := context.Background()
	_, c := server(t)
	f := newFence(t, c, "w/fence")
	if _, err := etcdfence.New(nil, "k"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("New(nil): %v", err)
	}
	if err := f.Put(ctx, 0, "w/res", "x"); !errors.Is(err, baton.ErrInvalidArgument) {
		t.Errorf("Put with token 0: %v", err)
	}
	if h, err := f.Highest(ctx); h != 0 || err != nil {
		t.Fatalf("Highest before any write, or after a refused one: %d, %v", h, err)
	}
	if err := f.Put(ctx, 5, "w/res", "five"); err != nil {
		t.Fatal(err)
	}
	if err := f.Put(ctx, 5, "w/res", "five again"); err != nil {
		t.Errorf("the same holder writing twice: %v", err)
	}
	err := f.Put(ctx, 4, "w/res", "stale")
	var se *fence.StaleError
	if !errors.Is(err, fence.ErrStale) || !errors.Is(err, baton.ErrLost) || !errors.As(err, &se) ||
		se.Token != 4 || se.Highest != 5 {
		t.Errorf("Put with 4 after 5: %v, want StaleError{4, 5}", err)
	}
	if v := get(t, c, "w/res"); v != "five again" {
		t.Errorf("w/res = %q after a stale write", v)
	}
	// Several operations in one fenced transaction, all or none.
	rs, err := f.Do(ctx, 6, clientv3.OpPut("w/a", "1"), clientv3.OpPut("w/b", "2"), clientv3.OpGet("w/res"))
	if err != nil || len(rs) != 3 || string(rs[2].GetResponseRange().Kvs[0].Value) != "five again" {
		t.Fatalf("Do: %v, %v", rs, err)
	}
	if _, err := f.Do(ctx, 5, clientv3.OpPut("w/a", "stale"), clientv3.OpDelete("w/b")); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Do with 5 after 6: %v", err)
	}
	if get(t, c, "w/a") != "1" || get(t, c, "w/b") != "2" {
		t.Errorf("a stale Do changed w/a or w/b")
	}
	if n, err := f.Delete(ctx, 6, "w/a"); n != 1 || err != nil {
		t.Errorf("Delete: %d, %v", n, err)
	}
	if h, err := f.Highest(ctx); h != 6 || err != nil {
		t.Errorf("Highest: %d, %v; want 6", h, err)
	}
}

// TestLargeTokens: tokens past 2^53 and of every decimal length compare as
// numbers.
func TestLargeTokens(t *testing.T) {
	ctx := context.Background()
	_, c := server(t)
	f := newFence(t, c, "big/fence")
	for _, tok := range []baton.Token{9, 10, 99, 100, 1<<53 + 2, 1<<63 + 1, 1<<64 - 2} {
		if err := f.Put(ctx, tok, "big/res", strconv.FormatUint(uint64(tok), 10)); err != nil {
			t.Fatalf("Put(%d): %v", tok, err)
		}
		if err := f.Put(ctx, tok-1, "big/res", "stale"); !errors.Is(err, fence.ErrStale) {
			t.Errorf("Put(%d) after %d: %v, want ErrStale", tok-1, tok, err)
		}
	}
	if h, err := f.Highest(ctx); h != 1<<64-2 || err != nil {
		t.Errorf("Highest %d, %v", h, err)
	}
}

// TestStaleHolder: a holder whose lock was taken over (here: it stopped
// renewing, its lease ran out, another process locked) is refused once the
// newer holder has written, though it never learnt of its loss.
func TestStaleHolder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, c := server(t)
	open := func() baton.Mutex {
		b, err := etcdlock.OpenURL(ctx, u)
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
	ha, err := a.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := newFence(t, c, "sh/fence")
	if err := f.Put(ctx, ha.Token(), "sh/res", "a"); err != nil {
		t.Fatal(err)
	}
	// The first holder is paused: its hold is released behind its back, as
	// an expired lease would release it.
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
	if err := f.Put(ctx, hb.Token(), "sh/res", "b"); err != nil {
		t.Fatal(err)
	}
	if err := f.Put(ctx, ha.Token(), "sh/res", "a, late"); !errors.Is(err, fence.ErrStale) {
		t.Errorf("the paused holder's write: %v, want ErrStale", err)
	}
	if v := get(t, c, "sh/res"); v != "b" {
		t.Errorf("sh/res = %q", v)
	}
}

// TestHammer: goroutines append their tokens to a log of keys through one
// fence, with tokens that others sometimes overtake; the accepted writes
// must come out in non-decreasing token order.
func TestHammer(t *testing.T) {
	const goroutines, per = 8, 60
	ctx := context.Background()
	_, c := server(t)
	var next, seq atomic.Int64
	var accepted, refused atomic.Int64
	var order []baton.Token // tokens in commit order, by the log's revisions
	var wg sync.WaitGroup
	for range goroutines {
		f := newFence(t, c, "h/fence")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				n := next.Add(1)
				if rand.IntN(3) == 0 {
					n -= int64(rand.IntN(goroutines))
				}
				tok := baton.Token(max(1, n))
				key := "h/log/" + strconv.FormatInt(seq.Add(1), 10)
				err := f.Put(ctx, tok, key, strconv.FormatUint(uint64(tok), 10))
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
	r, err := c.Get(ctx, "h/log/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range r.Kvs {
		v, _ := strconv.ParseUint(string(kv.Value), 10, 64)
		order = append(order, baton.Token(v))
	}
	if int64(len(order)) != accepted.Load() {
		t.Errorf("%d entries, %d accepted writes", len(order), accepted.Load())
	}
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			t.Fatalf("entry %d has token %d after %d", i, order[i], order[i-1])
		}
	}
	if refused.Load() == 0 {
		t.Errorf("no write was refused: the test did not exercise stale tokens")
	}
	t.Logf("%d accepted, %d refused", accepted.Load(), refused.Load())
}
