package zklock

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// received returns the packets the server at addr has received (srvr).
func received(t *testing.T, addr string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("srvr")); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Received: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("srvr of %s: no packet count (%v)", addr, sc.Err())
	return 0
}

// A handle that is a queue's only producer puts a job without keys in one
// request; once another handle puts too, Puts read the counter again, and
// every id is right either way.
func TestQueuePutRoundTrips(t *testing.T) {
	addr := standalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("queue-put-%d", time.Now().UnixNano())
	url := "zk://" + addr + "/qput?ttl=30s"
	handle := func() baton.Queue {
		q, err := open(t, url).Queue(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	q, q2 := handle(), handle()
	next := baton.JobID(1)
	put := func(q baton.Queue) {
		t.Helper()
		id, err := q.Put(ctx, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if id != next {
			t.Fatalf("Put: id %d, want %d", id, next)
		}
		next++
	}
	put(q)
	put(q) // its read finds the counter as the handle left it
	const n = 20
	before := received(t, addr)
	for range n {
		put(q)
	}
	// The srvr connection itself counts one.
	got := received(t, addr) - before - 1
	t.Logf("%d packets for %d Puts", got, n)
	if got > n+n/4 {
		t.Errorf("%d packets for %d Puts of the only producer, want about %d", got, n, n)
	}
	for range 5 {
		put(q2)
		put(q)
	}
	if st, err := q.Stats(ctx); err != nil || st.Ready != int(next-1) {
		t.Errorf("Stats = %+v, %v; want %d ready", st, err, next-1)
	}
}
