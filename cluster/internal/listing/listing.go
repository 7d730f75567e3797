// Package listing makes the List of a networked backend's Inspector out of
// what it finds and its Inspect, so that every backend lists alike: sorted,
// each object once, and an error that is not "removed meanwhile" ends the
// listing instead of leaving an object out unsaid.
package listing

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"slices"

	"github.com/batonlock/baton"
)

// Ref names one object a backend found.
type Ref struct {
	Kind baton.Kind
	Name string
}

// Inspect inspects each object of refs once, in order of name, then kind,
// and returns what it found in that order (never nil). An object removed
// between its discovery and its inspection (an error matching
// fs.ErrNotExist) is left out; any other error is returned. refs is sorted
// in place.
func Inspect(ctx context.Context, refs []Ref, inspect func(context.Context, baton.Kind, string) (baton.Info, error)) ([]baton.Info, error) {
	slices.SortFunc(refs, func(x, y Ref) int { return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.Kind, y.Kind)) })
	refs = slices.Compact(refs)
	out := make([]baton.Info, 0, len(refs))
	for _, r := range refs {
		info, err := inspect(ctx, r.Kind, r.Name)
		switch {
		case err == nil:
			out = append(out, info)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	return out, nil
}
