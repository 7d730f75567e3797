//go:build !unix

package fence

import (
	"context"
	"errors"
	"os"

	"github.com/batonlock/baton"
)

// File is a fence kept in a file beside the data; it needs flock(2), and
// OpenFile returns errors.ErrUnsupported on this system.
type File struct{ path string }

// OpenFile returns an error matching errors.ErrUnsupported.
func OpenFile(path string) (*File, error) {
	return nil, &os.PathError{Op: "open fence", Path: path, Err: errors.ErrUnsupported}
}

func (f *File) Path() string { return f.path }

func (f *File) Check(ctx context.Context, token baton.Token) error { return errors.ErrUnsupported }

func (f *File) Do(ctx context.Context, token baton.Token, fn func() error) error {
	return errors.ErrUnsupported
}

func (f *File) Highest(ctx context.Context) (baton.Token, error) { return 0, errors.ErrUnsupported }

func (f *File) Close() error { return errors.ErrUnsupported }
