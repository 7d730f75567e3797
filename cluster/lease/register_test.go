package lease

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/batonlock/baton"
)

// Register serves every scheme it is given with the backend's OpenURL,
// called with the URL as it is and no options.
func TestRegister(t *testing.T) {
	var got []string
	open := func(ctx context.Context, rawURL string, opts ...Option) (baton.Backend, error) {
		if len(opts) != 0 {
			t.Errorf("OpenURL(%q) got %d options, want none", rawURL, len(opts))
		}
		got = append(got, rawURL)
		return nil, baton.ErrUnsupported
	}
	Register(open, "leasetest-a", "leasetest-b")
	urls := []string{"leasetest-a://h/x", "LeaseTest-B://h/y"}
	for _, u := range urls {
		if _, err := baton.Open(context.Background(), u); !errors.Is(err, baton.ErrUnsupported) {
			t.Errorf("Open(%q) = %v, want the opener's error", u, err)
		}
	}
	if !slices.Equal(got, urls) {
		t.Errorf("opener called with %q, want %q", got, urls)
	}
	for _, s := range []string{"leasetest-a", "leasetest-b"} {
		if !slices.Contains(baton.Schemes(), s) {
			t.Errorf("Schemes() = %q, lacks %s", baton.Schemes(), s)
		}
	}
}
