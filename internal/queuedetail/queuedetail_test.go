package queuedetail

import (
	"testing"
	"time"

	"github.com/batonlock/baton"
)

func TestRoundTrip(t *testing.T) {
	for _, c := range []Counts{
		{},
		{Ready: 3, Delayed: 1, InFlight: 2, Dead: 4},
		{Ready: 1, Oldest: 1500 * time.Millisecond},
		{Ready: 12, Dead: 1, Oldest: 3*time.Hour + 2*time.Second},
	} {
		d := Format(c)
		got, ok := Parse(baton.Info{Kind: baton.KindQueue, Detail: d})
		if !ok || got != c {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", d, got, ok, c)
		}
	}
	// An age without a ready job is not written: nothing waits.
	if d := Format(Counts{Dead: 1, Oldest: time.Second}); d != "ready 0, delayed 0, in flight 0, dead 1" {
		t.Errorf("Format with no ready job = %q", d)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []baton.Info{
		{Kind: baton.KindMutex, Detail: "ready 1, delayed 0, in flight 0, dead 0"},
		{Kind: baton.KindQueue, Detail: "ready 1"},
		{Kind: baton.KindQueue, Detail: "ready 1, delayed 0, in flight 0, dead 0, oldest ready soon"},
		{Kind: baton.KindQueue, Detail: "ready 99999999999999999999, delayed 0, in flight 0, dead 0"},
		{Kind: baton.KindQueue, Detail: "ready 1, delayed 0, in flight 0, dead 0 and more"},
	} {
		if c, ok := Parse(in); ok {
			t.Errorf("Parse(%s %q) = %+v, want refused", in.Kind, in.Detail, c)
		}
	}
}
