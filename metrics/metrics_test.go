package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scraper serves a registry with c on httptest and reads it back.
type scraper struct {
	t   *testing.T
	url string
}

func serve(t *testing.T, c *metrics.Collector) *scraper {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return &scraper{t: t, url: srv.URL + "/metrics"}
}

func (s *scraper) scrape() map[string]*dto.MetricFamily {
	s.t.Helper()
	r, err := httpGet(s.url)
	if err != nil {
		s.t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(r))
	if err != nil {
		s.t.Fatalf("parsing the scrape: %v\n%s", err, r)
	}
	return fams
}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

// value returns the value of the series of family name whose labels
// include want (a counter's or gauge's value, a histogram's count), and
// whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	var sum float64
	found := false
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

// TestScrapeContended: goroutines on three handles of one local Mutex,
// some giving up while they wait, with the Collector attached; the
// /metrics endpoint shows the waiters while they wait, and afterwards
// counts that match what the goroutines recorded.
func TestScrapeContended(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := metrics.New()
	if err := baton.Observe(b, c); err != nil {
		t.Fatal(err)
	}
	s := serve(t, c)
	ctx := context.Background()
	var ms [3]baton.Mutex
	for i := range ms {
		if ms[i], err = b.Mutex(ctx, "jobs"); err != nil {
			t.Fatal(err)
		}
	}
	lbl := map[string]string{"backend": "local", "primitive": "mutex", "name": "jobs"}

	// While one holds, eight wait: the gauge shows them.
	if _, err := ms[0].Lock(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			m := ms[1+i%2]
			if _, err := m.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			if err := m.Unlock(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if v, _ := value(s.scrape(), "baton_waiters", lbl); v == 8 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("baton_waiters %v while 8 goroutines wait, want 8", v)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	if err := ms[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	granted, failed, released := int64(9), int64(0), int64(9)

	// The hammer.
	var ok, bad atomic.Int64
	for g := range 24 {
		wg.Go(func() {
			m := ms[g%3]
			for range 100 {
				lctx, cancel := context.WithTimeout(ctx, time.Second)
				if rand.IntN(3) == 0 {
					cancel()
					lctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(300))*time.Microsecond)
				}
				_, err := m.Lock(lctx)
				cancel()
				if err != nil {
					bad.Add(1)
					continue
				}
				ok.Add(1)
				if err := m.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	granted += ok.Load()
	failed += bad.Load()
	released += ok.Load()
	if failed == 0 {
		t.Log("no acquisition gave up; the failure counts are checked at zero")
	}

	f := s.scrape()
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range lbl {
			m[a] = b
		}
		return m
	}
	checks := []struct {
		metric string
		labels map[string]string
		want   int64
	}{
		{"baton_acquisitions_total", with("result", "granted"), granted},
		{"baton_acquisitions_total", with("result", "failed"), failed},
		{"baton_wait_seconds", lbl, granted + failed},
		{"baton_hold_seconds", lbl, released},
		{"baton_releases_total", lbl, released},
		{"baton_waiters", lbl, 0},
		{"baton_errors_total", with("class", "deadline"), failed},
	}
	for _, ch := range checks {
		got, found := value(f, ch.metric, ch.labels)
		if !found && ch.want != 0 {
			t.Errorf("%s%v: no series", ch.metric, ch.labels)
			continue
		}
		if int64(got) != ch.want {
			t.Errorf("%s%v = %v, want %d", ch.metric, ch.labels, got, ch.want)
		}
	}
	if v, _ := value(f, "baton_losses_total", lbl); v != 0 {
		t.Errorf("baton_losses_total %v, want 0", v)
	}
}

// TestNameLimit: past WithMaxNames distinct names, names are counted under
// "other"; WithNameLabel replaces the mapping.
func TestNameLimit(t *testing.T) {
	b, err := local.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	lockAll := func(names ...string) {
		for _, n := range names {
			m, err := b.Mutex(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			m.Close()
		}
	}
	c := metrics.New(metrics.WithMaxNames(2))
	if err := baton.Observe(b, c); err != nil {
		t.Fatal(err)
	}
	s := serve(t, c)
	lockAll("a", "b", "c", "d", "a", "e")
	f := s.scrape()
	for name, want := range map[string]float64{"a": 2, "b": 1, "other": 3, "c": 0} {
		got, _ := value(f, "baton_acquisitions_total", map[string]string{"name": name, "result": "granted"})
		if got != want {
			t.Errorf("acquisitions of name label %q: %v, want %v", name, got, want)
		}
	}
	if n := len(f["baton_releases_total"].GetMetric()); n != 3 {
		t.Errorf("%d release series, want 3 (a, b, other)", n)
	}

	c2 := metrics.New(metrics.WithNameLabel(func(n string) string { p, _, _ := strings.Cut(n, "/"); return p }))
	if err := baton.Observe(b, c2); err != nil {
		t.Fatal(err)
	}
	s2 := serve(t, c2)
	var names []string
	for i := range 300 {
		names = append(names, fmt.Sprintf("jobs/%d", i))
	}
	lockAll(names...)
	if got, _ := value(s2.scrape(), "baton_acquisitions_total", map[string]string{"name": "jobs"}); got != 300 {
		t.Errorf("acquisitions labelled jobs: %v, want 300", got)
	}
}

// TestSameHostLinksNoPrometheus: a same-host program that does not import
// this package links no client_golang; one that does, does.
func TestSameHostLinksNoPrometheus(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command on PATH")
	}
	deps := func(pkgs ...string) string {
		out, err := exec.Command(goTool, append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		return string(out)
	}
	same := deps("github.com/batonlock/baton/examples/workers", "github.com/batonlock/baton/local", "github.com/batonlock/baton")
	if !strings.Contains(same, "github.com/batonlock/baton/local\n") {
		t.Fatalf("go list shows no local:\n%s", same)
	}
	for _, d := range strings.Split(same, "\n") {
		if strings.HasPrefix(d, "github.com/prometheus/") {
			t.Errorf("a same-host program links %s", d)
		}
	}
	if !strings.Contains(deps("github.com/batonlock/baton/metrics"), "github.com/prometheus/client_golang/prometheus\n") {
		t.Error("package metrics does not link client_golang: the check above proves nothing")
	}
}

// TestEventMapping: handoffs, losses and errors of the Backend itself,
// which a local run does not make, land in their metrics.
func TestEventMapping(t *testing.T) {
	c := metrics.New()
	s := serve(t, c)
	ev := baton.Event{Backend: "redis", Kind: baton.KindMutex, Name: "jobs", Op: "unlock"}
	for _, typ := range []baton.EventType{baton.EventPassed, baton.EventPassed, baton.EventLost} {
		e := ev
		e.Type = typ
		if typ == baton.EventLost {
			e.Err = baton.ErrLost
		}
		c.Observe(e)
	}
	c.Observe(baton.Event{Type: baton.EventError, Backend: "redis", Op: "close", Err: errors.New("connection reset")})
	f := s.scrape()
	lbl := map[string]string{"backend": "redis", "primitive": "mutex", "name": "jobs"}
	for metric, want := range map[string]float64{"baton_handoffs_total": 2, "baton_losses_total": 1} {
		if got, _ := value(f, metric, lbl); got != want {
			t.Errorf("%s = %v, want %v", metric, got, want)
		}
	}
	if got, _ := value(f, "baton_errors_total", map[string]string{"backend": "redis", "primitive": "", "op": "close", "class": "other"}); got != 1 {
		t.Errorf("errors of the Backend itself: %v, want 1", got)
	}
}
