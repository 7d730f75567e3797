//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
	"github.com/gofrs/flock"
)

// mutexH is one handle on a named exclusive lock.
type mutexH interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
	close() error
}

// rwH is one handle on a named reader/writer lock; lock is the write side.
type rwH interface {
	mutexH
	rlock(ctx context.Context) error
	runlock(ctx context.Context) error
}

// semH is one handle on a named counting semaphore; each call takes or
// gives back one permit.
type semH interface {
	acquire(ctx context.Context) error
	release(ctx context.Context) error
	close() error
}

// subject is one implementation under test. Each open function returns a
// new, independent handle (a separate client, as another process would
// have); nil when the subject lacks the primitive.
type subject struct {
	name  string
	id    string // short, used in key names
	baton bool
	// kind groups rows: "same-host", "redis", "etcd".
	kind string
	// proc: the subject can be opened by a re-executed worker process
	// from the namespace directory alone.
	proc  bool
	mutex func(ctx context.Context, key string) (mutexH, error)
	// client opens a mutex handle as a separate client would: for baton's
	// cluster backends, on a Backend of its own (handles of one Backend pass
	// a Mutex among themselves without the server). nil: as mutex.
	client func(ctx context.Context, key string) (mutexH, error)
	rw     func(ctx context.Context, key string) (rwH, error)
	sem    func(ctx context.Context, key string, permits int) (semH, error)
}

// batonMutex and friends adapt the public baton API.
type batonMutex struct{ m baton.Mutex }

func (b batonMutex) lock(ctx context.Context) error   { _, err := b.m.Lock(ctx); return err }
func (b batonMutex) unlock(ctx context.Context) error { return b.m.Unlock(ctx) }
func (b batonMutex) close() error                     { return b.m.Close() }

type batonRW struct{ m baton.RWMutex }

func (b batonRW) lock(ctx context.Context) error    { _, err := b.m.Lock(ctx); return err }
func (b batonRW) unlock(ctx context.Context) error  { return b.m.Unlock(ctx) }
func (b batonRW) rlock(ctx context.Context) error   { _, err := b.m.RLock(ctx); return err }
func (b batonRW) runlock(ctx context.Context) error { return b.m.RUnlock(ctx) }
func (b batonRW) close() error                      { return b.m.Close() }

type batonSem struct{ s baton.Semaphore }

func (b batonSem) acquire(ctx context.Context) error { _, err := b.s.Acquire(ctx, 1); return err }
func (b batonSem) release(ctx context.Context) error { return b.s.Release(ctx, 1) }
func (b batonSem) close() error                      { return b.s.Close() }

// batonSubject builds the rows of one baton Backend.
func batonSubject(name, id, kind string, proc bool, b baton.Backend, withMutex, withRW, withSem bool) *subject {
	s := &subject{name: name, id: id, baton: true, kind: kind, proc: proc}
	if withMutex {
		s.mutex = func(ctx context.Context, key string) (mutexH, error) {
			m, err := b.Mutex(ctx, id+"-"+key)
			if err != nil {
				return nil, err
			}
			return batonMutex{m}, nil
		}
	}
	if withRW {
		s.rw = func(ctx context.Context, key string) (rwH, error) {
			m, err := b.RWMutex(ctx, id+"-"+key)
			if err != nil {
				return nil, err
			}
			return batonRW{m}, nil
		}
	}
	if withSem {
		s.sem = func(ctx context.Context, key string, permits int) (semH, error) {
			m, err := b.Semaphore(ctx, fmt.Sprintf("%s-%s-%d", id, key, permits), int64(permits))
			if err != nil {
				return nil, err
			}
			return batonSem{m}, nil
		}
	}
	return s
}

// clientOf returns s.client, or s.mutex when s has no notion of clients.
func clientOf(s *subject) func(ctx context.Context, key string) (mutexH, error) {
	if s.client != nil {
		return s.client
	}
	return s.mutex
}

// withClients gives a baton subject handles on Backends of their own,
// opened by open and closed with the handle.
func withClients(s *subject, open func() (baton.Backend, error)) *subject {
	s.client = func(ctx context.Context, key string) (mutexH, error) {
		b, err := open()
		if err != nil {
			return nil, err
		}
		m, err := b.Mutex(ctx, s.id+"-"+key)
		if err != nil {
			b.Close()
			return nil, err
		}
		return batonClient{batonMutex{m}, b}, nil
	}
	return s
}

type batonClient struct {
	batonMutex
	b baton.Backend
}

func (c batonClient) close() error { return errors.Join(c.m.Close(), c.b.Close()) }

// The in-process floors: every handle of one key shares one Go object.
type syncMutex struct{ m *sync.RWMutex }

func (s syncMutex) lock(context.Context) error    { s.m.Lock(); return nil }
func (s syncMutex) unlock(context.Context) error  { s.m.Unlock(); return nil }
func (s syncMutex) rlock(context.Context) error   { s.m.RLock(); return nil }
func (s syncMutex) runlock(context.Context) error { s.m.RUnlock(); return nil }
func (s syncMutex) close() error                  { return nil }

type plainMutex struct{ m *sync.Mutex }

func (s plainMutex) lock(context.Context) error   { s.m.Lock(); return nil }
func (s plainMutex) unlock(context.Context) error { s.m.Unlock(); return nil }
func (s plainMutex) close() error                 { return nil }

// tokenWord is the floor of a lock that gives fencing tokens and whose
// word has no room for the token: a compare-and-swap takes the word, an
// atomic add draws the token, a compare-and-swap gives the word back. It
// only serves the uncontended table (a taker of a held word spins).
type tokenWord struct{ w *[2]atomic.Uint64 }

func (t tokenWord) lock(context.Context) error {
	for !t.w[0].CompareAndSwap(0, 1) {
		runtime.Gosched()
	}
	t.w[1].Add(1)
	return nil
}

func (t tokenWord) unlock(context.Context) error {
	if !t.w[0].CompareAndSwap(1, 0) {
		return errors.New("token word: unlock of a free word")
	}
	return nil
}

func (t tokenWord) close() error { return nil }

// tokenWordSubject is the token word's row.
func tokenWordSubject() *subject {
	words := &shared[[2]atomic.Uint64]{mk: func() *[2]atomic.Uint64 { return new([2]atomic.Uint64) }}
	return &subject{name: tokenWordName, id: "tokenword", kind: "same-host",
		mutex: func(ctx context.Context, key string) (mutexH, error) { return tokenWord{words.get(key)}, nil }}
}

const tokenWordName = "CAS + token add + CAS (floor)"

type chanSem chan struct{}

func (c chanSem) acquire(ctx context.Context) error {
	select {
	case c <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (c chanSem) release(context.Context) error { <-c; return nil }
func (c chanSem) close() error                  { return nil }

// shared returns the one object per key of an in-process floor.
type shared[T any] struct {
	mu sync.Mutex
	m  map[string]*T // guarded by mu
	mk func() *T
}

func (s *shared[T]) get(key string) *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*T{}
	}
	v, ok := s.m[key]
	if !ok {
		v = s.mk()
		s.m[key] = v
	}
	return v
}

type gofrsH struct{ f *flock.Flock }

func (g gofrsH) lock(context.Context) error    { return g.f.Lock() }
func (g gofrsH) unlock(context.Context) error  { return g.f.Unlock() }
func (g gofrsH) rlock(context.Context) error   { return g.f.RLock() }
func (g gofrsH) runlock(context.Context) error { return g.f.Unlock() }
func (g gofrsH) close() error                  { return g.f.Close() }

// hostEnv is what the same-host subjects share in one process: the
// namespace directory and the baton backends opened on it.
type hostEnv struct {
	dir      string
	flockB   baton.Backend // Mutex and RWMutex on flock
	fastB    baton.Backend // futex Mutex, shared-memory RWMutex and Semaphore (local's defaults)
	sysvB    baton.Backend // System V RWMutex and Semaphore
	subjects []*subject
}

func safeKey(key string) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(key)
}

func openHostEnv(dir string) (*hostEnv, error) {
	fb, err := local.Open(dir, local.WithMutex(local.MutexFlock), local.WithRWMutex(local.RWFlock))
	if err != nil {
		return nil, err
	}
	xb, err := local.Open(dir, local.WithMutex(local.MutexFutex), local.WithRWMutex(local.RWShm), local.WithSemaphore(local.SemShm))
	if err != nil {
		fb.Close()
		return nil, err
	}
	sb, err := local.Open(dir, local.WithRWMutex(local.RWSysV), local.WithSemaphore(local.SemSysV))
	if err != nil {
		fb.Close()
		xb.Close()
		return nil, err
	}
	h := &hostEnv{dir: dir, flockB: fb, fastB: xb, sysvB: sb}

	mutexes := &shared[sync.Mutex]{mk: func() *sync.Mutex { return new(sync.Mutex) }}
	rws := &shared[sync.RWMutex]{mk: func() *sync.RWMutex { return new(sync.RWMutex) }}
	chans := &shared[chan struct{}]{}
	var chansMu sync.Mutex // guards the capacity chosen at first use of a key
	h.subjects = append(h.subjects,
		&subject{name: "sync.Mutex", id: "sync", kind: "same-host",
			mutex: func(ctx context.Context, key string) (mutexH, error) {
				return plainMutex{mutexes.get(key)}, nil
			},
			rw: func(ctx context.Context, key string) (rwH, error) {
				return syncMutex{rws.get(key)}, nil
			},
			sem: func(ctx context.Context, key string, permits int) (semH, error) {
				chansMu.Lock()
				chans.mk = func() *chan struct{} { c := make(chan struct{}, permits); return &c }
				c := chans.get(fmt.Sprintf("%s-%d", key, permits))
				chansMu.Unlock()
				return chanSem(*c), nil
			}},
		&subject{name: "raw flock", id: "rawflock", kind: "same-host", proc: true,
			mutex: func(ctx context.Context, key string) (mutexH, error) {
				return openRawFlock(filepath.Join(dir, "rawflock-"+safeKey(key)))
			},
			rw: func(ctx context.Context, key string) (rwH, error) {
				return openRawFlock(filepath.Join(dir, "rawflock-rw-"+safeKey(key)))
			}},
		&subject{name: "gofrs/flock", id: "gofrs", kind: "same-host", proc: true,
			mutex: func(ctx context.Context, key string) (mutexH, error) {
				return gofrsH{flock.New(filepath.Join(dir, "gofrs-"+safeKey(key)))}, nil
			},
			rw: func(ctx context.Context, key string) (rwH, error) {
				return gofrsH{flock.New(filepath.Join(dir, "gofrs-rw-"+safeKey(key)))}, nil
			}},
		&subject{name: "raw semop", id: "rawsem", kind: "same-host", proc: true,
			mutex: func(ctx context.Context, key string) (mutexH, error) {
				return openRawSem(dir, "m-"+safeKey(key), 1, 1)
			},
			rw: func(ctx context.Context, key string) (rwH, error) {
				s, err := openRawSem(dir, "rw-"+safeKey(key), 2, 0)
				if err != nil {
					return nil, err
				}
				return rawSemRW{s}, nil
			},
			sem: func(ctx context.Context, key string, permits int) (semH, error) {
				return openRawSem(dir, fmt.Sprintf("s-%s-%d", safeKey(key), permits), 1, permits)
			}},
		batonSubject("baton local/flock", "bflock", "same-host", true, fb, true, true, false),
		batonSubject("baton local/futex", "bfutex", "same-host", true, xb, true, false, false),
		batonSubject("baton local/shm", "bshm", "same-host", true, xb, false, true, true),
		batonSubject("baton local/sysv", "bsysv", "same-host", true, sb, false, true, true),
	)
	return h, nil
}

func (h *hostEnv) close() error {
	return errors.Join(h.flockB.Close(), h.fastB.Close(), h.sysvB.Close())
}

func (h *hostEnv) subject(name string) (*subject, error) {
	for _, s := range h.subjects {
		if s.name == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no subject %q", name)
}
