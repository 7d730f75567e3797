package locktest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckFindsViolations(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recs     []Rec
		capacity int64
		want     string // substring of an error; "" for a clean history
	}{
		{"clean", []Rec{{0, 10, true, 1, 1, "a"}, {11, 20, true, 2, 1, "b"}, {21, 30, false, 2, 1, "c"}, {22, 29, false, 2, 1, "d"}}, 0, ""},
		{"exclusive overlap", []Rec{{0, 10, true, 1, 1, "a"}, {5, 20, true, 2, 1, "b"}}, 0, "overlapping"},
		{"reader inside writer", []Rec{{0, 10, true, 1, 1, "a"}, {5, 6, false, 1, 1, "b"}}, 0, "overlapping"},
		{"writer inside reader", []Rec{{0, 10, false, 1, 1, "a"}, {5, 6, true, 2, 1, "b"}}, 0, "overlapping"},
		{"token not increasing", []Rec{{0, 10, true, 5, 1, "a"}, {11, 20, true, 5, 1, "b"}}, 0, "does not exceed"},
		{"token going back", []Rec{{0, 10, true, 5, 1, "a"}, {11, 20, true, 3, 1, "b"}}, 0, "does not exceed"},
		{"permits within capacity", []Rec{{0, 10, false, 0, 2, "a"}, {5, 20, false, 0, 1, "b"}, {10, 20, false, 0, 2, "c"}}, 3, ""},
		{"permits over capacity", []Rec{{0, 10, false, 0, 2, "a"}, {5, 20, false, 0, 2, "b"}}, 3, "4 permits held at once"},
		{"ends before start", []Rec{{10, 5, true, 1, 1, "a"}}, 0, "ends before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := Check(tc.recs, tc.capacity)
			if tc.want == "" {
				for _, err := range errs {
					t.Errorf("unexpected: %v", err)
				}
				return
			}
			for _, err := range errs {
				if strings.Contains(err.Error(), tc.want) {
					return
				}
			}
			t.Errorf("got %v, want an error containing %q", errs, tc.want)
		})
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	var h History
	h.Add(Rec{1, 2, true, 3, 1, "p1/h0/g0"})
	h.Add(Rec{4, 5, false, 0, 2, "p2/h1/g1"})
	p := filepath.Join(t.TempDir(), "h")
	if err := writeHistory(p, &h); err != nil {
		t.Fatal(err)
	}
	got, err := ReadHistory(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != h.recs[0] || got[1] != h.recs[1] {
		t.Fatalf("round trip: %+v", got)
	}
	if err := os.WriteFile(p, []byte("1 2 x 3 1 a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHistory(p); err == nil {
		t.Error("a malformed line was accepted")
	}
}
