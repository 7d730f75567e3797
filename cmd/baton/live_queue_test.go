package main

import (
	"bytes"
	"regexp"
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
	writeLive(&b, []baton.Info{{Name: "work", Kind: baton.KindQueue, Waiters: 2, Detail: "ready 3, delayed 1, in flight 1, dead 0, oldest ready 2.5s",
		Holders: []baton.Holder{{PID: 42, Owner: "job 7", Mode: "exclusive", Token: 9, Since: now.Add(-time.Second)}}}}, now)
	out := b.String()
	if !strings.Contains(out, "queue (ready 3, delayed 1, in flight 1, dead 0, oldest ready 2.5s)") || !strings.Contains(out, "job 7") {
		t.Fatalf("live view of a queue:\n%s", out)
	}
	// The queue's own table, with the status page's columns.
	head := regexp.MustCompile(`(?m)^QUEUE +READY +DELAYED +IN FLIGHT +DEAD +OLDEST READY$`)
	row := regexp.MustCompile(`(?m)^work +3 +1 +1 +0 +2\.5s$`)
	if !head.MatchString(out) || !row.MatchString(out) {
		t.Fatalf("live view lacks the queue's table:\n%s", out)
	}
}
