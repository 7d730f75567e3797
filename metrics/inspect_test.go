package metrics_test

import (
	"context"
	"encoding/binary"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/servers"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serveInspector serves a registry with NewInspector(in, opts...) on
// httptest.
func serveInspector(t *testing.T, in baton.Inspector, opts ...metrics.Option) *scraper {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewInspector(in, opts...))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return &scraper{t: t, url: srv.URL + "/metrics"}
}

// TestInspectorTokensExact: a same-host reader/writer lock whose last
// token was set past 2^60, where float64 samples are 256 apart: the two
// halves of last_token give the hold's token exactly. The same-host backend does not know when a hold
// started, so held_seconds is left out rather than read 0.
func TestInspectorTokensExact(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	b, err := local.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := b.RWMutex(ctx, "jobs/exact")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	seedToken(t, dir, "jobs/exact", 1<<60+1)
	h, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok := uint64(h.Token())
	if tok <= 1<<60 {
		t.Fatalf("token %d: want one past 2^60 for this test", tok)
	}
	fams := serveInspector(t, b.(baton.Inspector)).scrape()
	lv := map[string]string{"name": "jobs/exact", "primitive": "rwmutex"}
	high, ok1 := value(fams, "baton_object_last_token_high", lv)
	low, ok2 := value(fams, "baton_object_last_token_low", lv)
	if !ok1 || !ok2 {
		t.Fatalf("no last_token_high/low series for jobs/exact")
	}
	if got := uint64(high)<<32 | uint64(low); got != tok || high != float64(tok>>32) || low != float64(tok&0xffffffff) {
		t.Errorf("last_token_high %v, low %v: %d, want %d", high, low, got, tok)
	}
	if n, _ := value(fams, "baton_object_holders", lv); n != 1 {
		t.Errorf("holders %v, want 1", n)
	}
	if v, ok := value(fams, "baton_object_held_seconds", lv); ok {
		t.Errorf("held_seconds %v for a hold whose start the backend does not know; want none", v)
	}
	if _, ok := fams["baton_object_last_token"]; ok {
		t.Errorf("baton_object_last_token, a float64 of the token, is still exported")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// seedToken sets the last token of the same-host RWMutex name in the
// namespace dir to last (the word at offset 16 of its shmrw file).
// The lock's file exists while a handle of it is open (an idle one is
// reclaimed at the last close), so the caller has one open.
func seedToken(t *testing.T, dir, name string, last uint64) {
	t.Helper()
	enc, err := ipc.EncodeName(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "shmrw", enc), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, last), 16); err != nil {
		t.Fatal(err)
	}
}

// TestInspectorBackendDown: /metrics of a Redis backend whose server was
// stopped still answers 200, with up 0 and the failed listings counted;
// while the server ran, up was 1.
func TestInspectorBackendDown(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not on PATH (CI): %v", err)
		}
		t.Skip("redis-server not on PATH")
	}
	u, stop, err := servers.Serve(servers.Redis)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	b, err := baton.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := b.Mutex(ctx, "jobs/down")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := serveInspector(t, b.(baton.Inspector))
	fams := s.scrape()
	if up, ok := value(fams, "baton_inspect_up", nil); !ok || up != 1 {
		t.Errorf("up %v (%v) while the server runs, want 1", up, ok)
	}
	if n, _ := value(fams, "baton_inspect_errors_total", nil); n != 0 {
		t.Errorf("errors_total %v while the server runs, want 0", n)
	}
	stop()
	for i := 1; i <= 2; i++ {
		fams = s.scrape() // fails the test unless the answer is 200
		if up, ok := value(fams, "baton_inspect_up", nil); !ok || up != 0 {
			t.Errorf("scrape %d: up %v (%v) with the server stopped, want 0", i, up, ok)
		}
		if n, _ := value(fams, "baton_inspect_errors_total", nil); n != float64(i) {
			t.Errorf("scrape %d: errors_total %v, want %d", i, n, i)
		}
	}
}
