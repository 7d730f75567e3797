package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton"
)

// TestLiveQueueCounts: the live view (top, and the status page alike)
// shows a queue's counts by state beside its kind, and its claims as
// holders.
func TestLiveQueueCounts(t *testing.T) {
	now := time.Now()
	var b bytes.Buffer
	writeLive(&b, []baton.Info{{Name: "work", Kind: baton.KindQueue, Waiters: 2, Detail: "ready 3, delayed 1, in flight 1, dead 0",
		Holders: []baton.Holder{{PID: 42, Owner: "job 7", Mode: "exclusive", Token: 9, Since: now.Add(-time.Second)}}}}, now)
	out := b.String()
	if !strings.Contains(out, "queue (ready 3, delayed 1, in flight 1, dead 0)") || !strings.Contains(out, "job 7") {
		t.Fatalf("live view of a queue:\n%s", out)
	}
}
