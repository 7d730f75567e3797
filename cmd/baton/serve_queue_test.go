package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
)

// deadQueue makes queue name of the namespace ns with one ready job and
// dead dead letters, and returns a handle of it (closed with the test).
func deadQueue(t *testing.T, ns, name string, dead int) baton.Queue {
	t.Helper()
	ctx := context.Background()
	b, err := local.Open(ns[len("local://"):])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	q, err := b.Queue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	for i := range dead {
		if _, err := q.Put(ctx, fmt.Appendf(nil, "dead %d", i), baton.MaxAttempts(1)); err != nil {
			t.Fatal(err)
		}
		j, err := q.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Fail(ctx, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Put(ctx, []byte("ready")); err != nil {
		t.Fatal(err)
	}
	return q
}

func stats(t *testing.T, q baton.Queue) baton.QueueStats {
	t.Helper()
	s, err := q.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestServeRequeueInChromium: the status page shows a queue's counts;
// its requeue form makes the dead letters ready, and the page shows the
// counts change.
func TestServeRequeueInChromium(t *testing.T) {
	chromium := needTool(t, "chromium")
	ns := namespace(t)
	q := deadQueue(t, ns, "mail/out", 2)
	base := startServe(t, ns)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1100, 600),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	row := `tr[data-queue="mail/out"]`
	// cells waits until the queue's row shows ready and dead.
	cells := func(ready, dead string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			r, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(row+" td.ready")))
			d, err2 := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(row+" td.dead")))
			err = errors.Join(err, err2)
			if err == nil && r == ready && d == dead {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page's row of the queue: ready %q, dead %q (%v); want %s, %s", r, d, err, ready, dead)
			}
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(row+" td.dead"))); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	cells("1", "2")
	if inflight, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(row+" td.inflight"))); err != nil || inflight != "0" {
		t.Errorf("in flight %q, %v; want 0", inflight, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row+" form.requeue button"))); err != nil {
		t.Fatalf("chromium: click requeue: %v", err)
	}
	cells("3", "0")
	if s := stats(t, q); s.Ready != 3 || s.Dead != 0 {
		t.Errorf("after requeue from the page: %+v, want 3 ready, 0 dead", s)
	}
}

// TestServeDeadLettersRefused: a POST without the page's token, with a
// wrong one, from another origin, or a GET, changes nothing; the page's
// token from the page's origin purges.
func TestServeDeadLettersRefused(t *testing.T) {
	ns := namespace(t)
	q := deadQueue(t, ns, "jobs", 2)
	base := startServe(t, ns)
	m := regexp.MustCompile(`<meta name="baton-token" content="([0-9a-f]{32})">`).FindStringSubmatch(get(t, base+"/"))
	if m == nil {
		t.Fatal("the page carries no token")
	}
	token := m[1]
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(op string, form url.Values, header map[string]string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/queues/"+op, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for what, c := range map[string]struct {
		form   url.Values
		header map[string]string
	}{
		"no token":         {url.Values{"name": {"jobs"}}, nil},
		"a wrong token":    {url.Values{"name": {"jobs"}, "token": {strings.Repeat("0", 32)}}, nil},
		"another origin":   {url.Values{"name": {"jobs"}, "token": {token}}, map[string]string{"Origin": "http://evil.example"}},
		"a cross-site tab": {url.Values{"name": {"jobs"}, "token": {token}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		for _, op := range []string{"purge", "requeue"} {
			if code := post(op, c.form, c.header); code != http.StatusForbidden {
				t.Errorf("%s with %s: %d, want 403", op, what, code)
			}
		}
	}
	resp, err := http.Get(base + "/queues/purge?name=jobs&token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET of purge: %d, want 405", resp.StatusCode)
	}
	if s := stats(t, q); s.Ready != 1 || s.Dead != 2 {
		t.Fatalf("after refused requests: %+v, want 1 ready, 2 dead (nothing changed)", s)
	}
	form := url.Values{"name": {"jobs"}, "token": {token}}
	if code := post("purge", form, map[string]string{"Origin": base, "Sec-Fetch-Site": "same-origin"}); code != http.StatusSeeOther {
		t.Errorf("purge with the token from the page's origin: %d, want 303", code)
	}
	if s := stats(t, q); s.Ready != 1 || s.Dead != 0 {
		t.Errorf("after purge: %+v, want 1 ready, 0 dead", s)
	}
}
