package listing

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"testing"

	"github.com/batonlock/baton"
)

func TestInspect(t *testing.T) {
	refs := []Ref{
		{baton.KindSemaphore, "b"}, {baton.KindMutex, "b"}, {baton.KindMutex, "a"},
		{baton.KindMutex, "b"}, {baton.KindCond, "gone"},
	}
	var asked []Ref
	got, err := Inspect(context.Background(), refs, func(_ context.Context, k baton.Kind, n string) (baton.Info, error) {
		asked = append(asked, Ref{k, n})
		if n == "gone" {
			return baton.Info{}, fmt.Errorf("cond %q: %w", n, fs.ErrNotExist)
		}
		return baton.Info{Kind: k, Name: n}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Ref{{baton.KindMutex, "a"}, {baton.KindMutex, "b"}, {baton.KindSemaphore, "b"}, {baton.KindCond, "gone"}}
	if !slices.Equal(asked, want) {
		t.Fatalf("inspected %v, want %v (sorted, each once)", asked, want)
	}
	if len(got) != 3 || got[0].Name != "a" || got[1].Kind != baton.KindMutex || got[2].Kind != baton.KindSemaphore {
		t.Fatalf("got %v: want a/mutex, b/mutex, b/semaphore, the removed one left out", got)
	}

	boom := errors.New("connection reset")
	if got, err := Inspect(context.Background(), []Ref{{baton.KindMutex, "x"}}, func(context.Context, baton.Kind, string) (baton.Info, error) {
		return baton.Info{}, boom
	}); !errors.Is(err, boom) || got != nil {
		t.Fatalf("got %v, %v: want the inspection's error and no list", got, err)
	}
	if got, err := Inspect(context.Background(), nil, nil); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty: got %#v, %v: want an empty, non-nil list", got, err)
	}
}
