package main

import (
	"context"
	"errors"
	"sync"

	"github.com/batonlock/baton"
)

// reopening is the Inspector of the live views (top, serve) over a backend
// that could not be opened when they started: each call tries to open it
// again and fails as the open did until the backend answers, so that
// serve's page and /metrics report the backend down (and count the
// failures) rather than baton refusing to start.
type reopening struct {
	raw string

	mu sync.Mutex
	b  baton.Backend   // guarded by mu; nil until an open succeeds
	in baton.Inspector // guarded by mu
}

func (r *reopening) get(ctx context.Context) (baton.Inspector, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.in != nil {
		return r.in, nil
	}
	b, err := openBackend(ctx, r.raw, backendOptions{})
	if err != nil {
		return nil, err
	}
	in, ok := b.(baton.Inspector)
	if !ok {
		closeBackend(b, releaseTimeout)
		return nil, errors.New("the backend cannot list its objects")
	}
	r.b, r.in = b, in
	return in, nil
}

func (r *reopening) List(ctx context.Context) ([]baton.Info, error) {
	in, err := r.get(ctx)
	if err != nil {
		return nil, err
	}
	return in.List(ctx)
}

func (r *reopening) Inspect(ctx context.Context, kind baton.Kind, name string) (baton.Info, error) {
	in, err := r.get(ctx)
	if err != nil {
		return baton.Info{}, err
	}
	return in.Inspect(ctx, kind, name)
}

func (r *reopening) Remove(ctx context.Context, kind baton.Kind, name string) error {
	in, err := r.get(ctx)
	if err != nil {
		return err
	}
	return in.Remove(ctx, kind, name)
}

// close closes the backend if an open succeeded.
func (r *reopening) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.b != nil {
		closeBackend(r.b, releaseTimeout)
	}
}

// Queue opens a queue of the backend once it answers (the status page's
// requeue and purge).
func (r *reopening) Queue(ctx context.Context, name string) (baton.Queue, error) {
	if _, err := r.get(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	b := r.b
	r.mu.Unlock()
	return b.Queue(ctx, name)
}
