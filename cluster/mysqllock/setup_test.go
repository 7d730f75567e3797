package mysqllock

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestConcurrentSetup: Backends opened at once on tables that do not exist
// yet all open (the floor row's insert can deadlock between them; the
// loser tries again), as the workers of examples/cluster do.
func TestConcurrentSetup(t *testing.T) {
	s := sharedServer(t)
	if _, err := s.admin(t).ExecContext(context.Background(), "CREATE DATABASE IF NOT EXISTS baton"); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		prefix := "setup" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10) + "_" + strconv.Itoa(round) + "_"
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				b, err := OpenURL(context.Background(), s.url("prefix="+prefix))
				if err != nil {
					errs <- err
					return
				}
				b.Close()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: Open of a Backend set up at the same time as others: %v", round, err)
		}
	}
}
