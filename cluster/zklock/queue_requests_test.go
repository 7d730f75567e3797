package zklock

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestQueueRequestsPerCycle: an uncontended Put+TryClaim+Ack makes five
// requests, as a bare leased claim does (a create, the list of records, a
// get, the claim's multi-op, the Ack's): the list of the claims is left
// out while the handle's last one was empty.
func TestQueueRequestsPerCycle(t *testing.T) {
	const cycles = 200
	ctx := context.Background()
	addr := standalone(t)
	b := open(t, "zk://"+addr+"/qrequests")
	q, err := b.Queue(ctx, fmt.Sprint("requests-", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	received := func() int {
		out, err := fourLetter(addr, "srvr")
		m := regexp.MustCompile(`Received: (\d+)`).FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("srvr: %v %q", err, out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	cycle := func() {
		if _, err := q.Put(ctx, []byte("job")); err != nil {
			t.Fatal(err)
		}
		j, err := q.TryClaim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		cycle()
	}
	before := received()
	for range cycles {
		cycle()
	}
	// The second srvr counts itself; a session ping or two may come.
	n := received() - before - 1
	t.Logf("%d requests in %d cycles", n, cycles)
	if n > 5*cycles+3 {
		t.Fatalf("%d requests in %d cycles: more than five each", n, cycles)
	}
}
