package mysqllock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batonlock/baton/locktest"
)

// TestKillConnectionsHistory: clients lock one name in turns while the
// test kills the session of whoever holds its user-level lock, again and
// again, on the server. The history checker finds no overlapping holds and
// tokens in order, and no hold is lost: the lease rows stay, and holders
// renew and give them back through the pool.
func TestKillConnectionsHistory(t *testing.T) {
	s := sharedServer(t)
	createDB(t, s, "baton")
	admin := s.admin(t)
	ctx := context.Background()
	name := testName(t)
	var hist locktest.History
	var wg sync.WaitGroup
	stop := time.Now().Add(3 * time.Second)
	for c := range 3 {
		b := openT(t, s.url(testQuery))
		for g := range 2 {
			m, err := b.Mutex(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			who := fmt.Sprintf("c%d/h%d", c, g)
			wg.Go(func() {
				for time.Now().Before(stop) {
					h, err := m.Lock(ctx)
					if err != nil {
						t.Errorf("%s: Lock: %v", who, err)
						return
					}
					start := locktest.Mono()
					time.Sleep(time.Millisecond)
					end := locktest.Mono()
					hist.Add(locktest.Rec{Start: start, End: end, Exclusive: true, Token: uint64(h.Token()), N: 1, Who: who})
					if err := h.Err(); err != nil {
						t.Errorf("%s: hold lost: %v", who, err)
					}
					if err := m.Unlock(ctx); err != nil {
						t.Errorf("%s: Unlock: %v", who, err)
						return
					}
				}
			})
		}
	}
	kills := 0
	for time.Now().Before(stop) {
		time.Sleep(20 * time.Millisecond)
		if id := holderConn(t, admin, name); id != 0 {
			if _, err := admin.Exec(fmt.Sprintf("KILL %d", id)); err == nil {
				kills++
			}
		}
	}
	wg.Wait()
	recs := hist.Records()
	t.Logf("%d holds, %d sessions killed", len(recs), kills)
	if kills == 0 || len(recs) == 0 {
		t.Fatalf("%d holds and %d kills: nothing was tested", len(recs), kills)
	}
	for _, err := range locktest.Check(recs, 0) {
		t.Error(err)
	}
}
