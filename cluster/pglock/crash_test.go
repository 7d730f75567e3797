package pglock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/cluster/lease"
)

// TestServerCrash: the server crashes under a holder and recovers, which
// empties the lease table. A client that asks for the lock as soon as the
// server is back gets it only after the holder's Loss fired (the marker
// rule: a name without a lease row waits a TTL from when the table was
// found empty), and its token is above every token handed out before the
// crash (the marker moved the sequence on).
func TestServerCrash(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	m1 := mutexT(t, openT(t, url), "fault-crash")
	m2 := mutexT(t, openT(t, url), "fault-crash")
	h1, err := m1.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.crash(t)
	h2 := afterLoss(t, h1, m2, true)
	if h2.Token() < h1.Token()+crashGap {
		t.Errorf("token %d after the crash, %d before: the sequence did not move past the crash", h2.Token(), h1.Token())
	}
	if err := m1.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Unlock of the hold from before the crash: %v, want ErrLost", err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The lease row is back: the next Lock does not wait.
	start := time.Now()
	if _, err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > faultTTL/2 {
		t.Errorf("Lock after a release waited %v", d)
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTokensFromCounterRows: a schema made before the token sequence (the
// counter rows of baton_tokens gave the tokens) is upgraded so that every
// new token is above those, passes included.
func TestTokensFromCounterRows(t *testing.T) {
	url := need(t)
	ctx := context.Background()
	const old = 1 << 40
	admin(t, `DROP TABLE IF EXISTS upg_tokens, upg_leases; DROP SEQUENCE IF EXISTS upg_token_seq;
CREATE TABLE upg_tokens (kind text NOT NULL, name text NOT NULL, n bigint NOT NULL,
	expires timestamptz, prev_expires timestamptz, PRIMARY KEY (kind, name));
INSERT INTO upg_tokens VALUES ('mutex', 'a', 7, NULL, NULL), ('rwmutex', 'b', 1099511627776, NULL, NULL)`)
	b := openT(t, url, lease.WithPrefix("upg_"))
	for _, name := range []string{"a", "z"} {
		m := mutexT(t, b, name)
		h, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Token() <= old+passTokens {
			t.Errorf("token %d of %q after a counter row at %d", h.Token(), name, old)
		}
		// Inspected while held: a free name keeps no row to inspect.
		if info, err := b.(baton.Inspector).Inspect(ctx, baton.KindMutex, name); err != nil || info.LastToken <= old {
			t.Errorf("Inspect of %q held after a counter row: %+v, %v", name, info, err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
