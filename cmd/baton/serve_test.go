package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// startServe starts baton serve on a free loopback port and returns its
// base URL.
func startServe(t *testing.T, backend string) string {
	t.Helper()
	c := command(backend, "serve", "--http", "127.0.0.1:0")
	stderr, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	stopCmd(t, c)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	re := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)/`)
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("baton serve ended before it listened")
			}
			if m := re.FindStringSubmatch(l); m != nil {
				go func() {
					for range lines {
					}
				}()
				return m[1]
			}
		case <-timeout:
			t.Fatal("baton serve did not say where it listens")
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v\n%s", url, resp.Status, err, b)
	}
	return string(b)
}

// TestServeJSONAndMetrics: while one baton holds a lock and another
// waits, /api/objects and /metrics of baton serve show both.
func TestServeJSONAndMetrics(t *testing.T) {
	s := startLiveScene(t)
	base := startServe(t, s.backend)
	var rep liveReport
	if err := json.Unmarshal([]byte(get(t, base+"/api/objects?sort=wait")), &rep); err != nil {
		t.Fatal(err)
	}
	found, owned := false, false
	for _, o := range rep.Objects {
		if o.Name == s.name && o.Waiters == 1 && len(o.Holders) == 1 && o.Holders[0].PID == s.pid {
			found = true
		}
		if o.Name == s.owned && len(o.Holders) == 1 && o.Holders[0].Owner == s.owner {
			owned = true
		}
	}
	if !found || rep.Schema != jsonSchema || rep.Sort != "wait" {
		t.Errorf("/api/objects lacks %s held by %d with a waiter: %+v", s.name, s.pid, rep)
	}
	if !owned {
		t.Errorf("/api/objects lacks %s held by owner %s: %+v", s.owned, s.owner, rep)
	}
	m := get(t, base+"/metrics")
	lbl := fmt.Sprintf(`{backend="local",name=%q,primitive="rwmutex"}`, s.name)
	for _, want := range []string{"baton_object_holders" + lbl + " 1", "baton_object_waiters" + lbl + " 1"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, m)
		}
	}
	if resp, err := http.Get(base + "/api/objects?sort=size"); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad sort: %v %v, want 400", resp.Status, err)
	}
}

// TestServePageInChromium loads the status page of baton serve in headless
// Chromium while one baton holds a lock and another waits, and finds the
// holder's pid and the waiter on the lock's row of the rendered page, and
// the owner of a Mutex held under an Owner on its row.
func TestServePageInChromium(t *testing.T) {
	chromium := needTool(t, "chromium")
	s := startLiveScene(t)
	base := startServe(t, s.backend)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 420),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	row := fmt.Sprintf(`tr[data-name=%q]`, s.name)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(row+" td.pid"))); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("chromium: text of %s: %v", sel, err)
		}
		return strings.TrimSpace(v)
	}
	pid, waiters, mode := text(row+" td.pid"), text(row+" td.waiters"), text(row+" td.mode")
	if pid != strconv.Itoa(s.pid) || waiters != "1" || mode != "exclusive" {
		t.Errorf("the page's row of %s: pid %q, waiters %q, mode %q; want %d, 1, exclusive", s.name, pid, waiters, mode, s.pid)
	}
	owned := fmt.Sprintf(`tr[data-name=%q]`, s.owned)
	if owner, pid := text(owned+" td.owner"), text(owned+" td.pid"); owner != s.owner || pid != strconv.Itoa(os.Getpid()) {
		t.Errorf("the page's row of %s: owner %q, pid %q; want %s, %d", s.owned, owner, pid, s.owner, os.Getpid())
	}
	if owner := text(row + " td.owner"); owner != "-" {
		t.Errorf("the page's row of %s: owner %q, want - (the RW lock records none)", s.name, owner)
	}
	if status := text("#status"); !strings.Contains(status, "2 held, 1 waiting") {
		t.Errorf("status line %q, want 2 held, 1 waiting", status)
	}
	if f := docsFile("serve.png"); f != "" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
