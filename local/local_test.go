package local_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/locktest"
)

// objects lists every file of a namespace directory.
func objects(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

var caps = locktest.Caps{
	RWMutex:      true,
	Semaphore:    true,
	Cond:         true,
	Value:        true,
	Queue:        true,
	CrossProcess: true,
	KillBound:    100 * time.Millisecond,
}

var (
	defaultSuite = locktest.Suite{
		Name:    "local",
		Open:    func(dir string) (baton.Backend, error) { return local.Open(dir) },
		Objects: objects,
		Caps:    caps,
	}
	flockSuite = locktest.Suite{
		Name: "local-flock",
		Open: func(dir string) (baton.Backend, error) {
			return local.Open(dir, local.WithMutex(local.MutexFlock), local.WithRWMutex(local.RWFlock))
		},
		Objects: objects,
		Caps:    caps,
	}
	sysvSuite = locktest.Suite{
		Name: "local-sysv",
		Open: func(dir string) (baton.Backend, error) {
			return local.Open(dir, local.WithRWMutex(local.RWSysV), local.WithSemaphore(local.SemSysV))
		},
		Objects: objects,
		Caps:    caps,
	}
	suites = []locktest.Suite{defaultSuite, flockSuite, sysvSuite}
)

// Environment of the idle and holding children.
const (
	envIdleRole = "BATON_LOCAL_IDLE_ROLE" // "wait:MECH" or "hold:MECH"
	envIdleDir  = "BATON_LOCAL_IDLE_DIR"
)

func TestMain(m *testing.M) {
	if os.Getenv(envHandoffDir) != "" {
		os.Exit(handoffChild())
	}
	if os.Getenv(envContendDir) != "" {
		os.Exit(contendChild())
	}
	if os.Getenv(envIdleRole) != "" {
		os.Exit(idleChild())
	}
	if os.Getenv(envRaceDir) != "" {
		os.Exit(raceChild())
	}
	locktest.Main(m, suites...)
}

// namespace returns a fresh namespace directory whose System V objects are
// removed when the test ends (the kernel keeps them after the files go).
func namespace(t *testing.T) string {
	dir := t.TempDir()
	t.Cleanup(func() {
		ns, err := ipc.OpenNamespace(dir)
		if err != nil {
			t.Error(err)
			return
		}
		if err := ipc.RemoveAll(ns); err != nil {
			t.Errorf("remove System V objects: %v", err)
		}
	})
	return dir
}

func TestDefaultConformance(t *testing.T) { locktest.Run(t, defaultSuite, namespace(t)) }

func TestFlockConformance(t *testing.T) { locktest.Run(t, flockSuite, namespace(t)) }

func TestSysVConformance(t *testing.T) { locktest.Run(t, sysvSuite, namespace(t)) }

func TestOptions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ns")
	for _, opt := range []local.Option{nil, local.WithMutex("spin"), local.WithRWMutex(""), local.WithSemaphore("flock"),
		local.WithLinger(-1), local.WithLinger(time.Minute + 1)} {
		if _, err := local.Open(dir, opt); !errors.Is(err, baton.ErrInvalidArgument) {
			t.Errorf("bad option accepted: %v", err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused Open created the namespace directory: %v", err)
	}
}

func TestInspector(t *testing.T) {
	ctx := context.Background()
	for _, s := range suites {
		t.Run(s.Name, func(t *testing.T) {
			b, err := s.Open(namespace(t))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			in, ok := b.(baton.Inspector)
			if !ok {
				t.Fatal("local backend does not implement baton.Inspector")
			}
			m, err := b.Mutex(ctx, "jobs/a")
			if err != nil {
				t.Fatal(err)
			}
			h, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sem, err := b.Semaphore(ctx, "gpu", 4)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sem.Acquire(ctx, 3); err != nil {
				t.Fatal(err)
			}
			rw, err := b.RWMutex(ctx, "db")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rw.RLock(ctx); err != nil {
				t.Fatal(err)
			}
			rinfo, err := in.Inspect(ctx, baton.KindRWMutex, "db")
			if err != nil {
				t.Fatal(err)
			}
			// System V does not say who holds a read lock (PID 0).
			if len(rinfo.Holders) != 1 || (rinfo.Holders[0].PID != os.Getpid() && rinfo.Holders[0].PID != 0) || rinfo.Holders[0].Mode != "shared" {
				t.Errorf("Inspect rwmutex = %+v, want one shared holder", rinfo)
			}
			if err := rw.RUnlock(ctx); err != nil {
				t.Fatal(err)
			}
			info, err := in.Inspect(ctx, baton.KindMutex, "jobs/a")
			if err != nil {
				t.Fatal(err)
			}
			if len(info.Holders) != 1 || info.Holders[0].PID != os.Getpid() || info.LastToken != h.Token() || info.Backend != "local" {
				t.Errorf("Inspect mutex = %+v, want one holder pid %d, last token %d", info, os.Getpid(), h.Token())
			}
			sinfo, err := in.Inspect(ctx, baton.KindSemaphore, "gpu")
			if err != nil {
				t.Fatal(err)
			}
			if sinfo.Capacity != 4 {
				t.Errorf("Inspect semaphore = %+v, want capacity 4", sinfo)
			}
			all, err := in.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[baton.Kind]bool{}
			for _, i := range all {
				seen[i.Kind] = true
			}
			if !seen[baton.KindMutex] || !seen[baton.KindSemaphore] || !seen[baton.KindRWMutex] {
				t.Errorf("List = %+v, want the mutex, the rwmutex and the semaphore", all)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := sem.Release(ctx, 3); err != nil {
				t.Fatal(err)
			}
			if err := in.Remove(ctx, baton.KindSemaphore, "gpu"); err != nil {
				t.Fatal(err)
			}
			if _, err := in.Inspect(ctx, baton.KindSemaphore, "gpu"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Inspect after Remove: %v", err)
			}
			if err := in.Remove(ctx, baton.KindSemaphore, "gpu"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("second Remove: %v", err)
			}
			if _, err := in.Inspect(ctx, baton.KindMutex, "../x"); !errors.Is(err, baton.ErrInvalidName) {
				t.Errorf("Inspect with a bad name: %v", err)
			}
		})
	}
}

// Removing a held object (baton rm) fires the holder's Lost, and its Unlock
// reports the loss: the next opener gets a new object, so the hold is not
// exclusive any more.
func TestRemoveFiresLost(t *testing.T) {
	ctx := context.Background()
	for _, s := range suites {
		for _, kind := range []baton.Kind{baton.KindMutex, baton.KindRWMutex} {
			t.Run(s.Name+"/"+string(kind), func(t *testing.T) {
				b, err := s.Open(namespace(t))
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				var m baton.Mutex
				if kind == baton.KindMutex {
					m, err = b.Mutex(ctx, "held")
				} else {
					m, err = b.RWMutex(ctx, "held")
				}
				if err != nil {
					t.Fatal(err)
				}
				h, err := m.Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.(baton.Inspector).Remove(ctx, kind, "held"); err != nil {
					t.Fatal(err)
				}
				select {
				case <-h.Lost():
				case <-time.After(5 * time.Second):
					t.Fatal("Lost did not fire after the held object was removed")
				}
				if !errors.Is(h.Err(), baton.ErrLost) {
					t.Errorf("Err() = %v, want ErrLost", h.Err())
				}
				if err := m.Unlock(ctx); !errors.Is(err, baton.ErrLost) {
					t.Errorf("Unlock after removal = %v, want ErrLost", err)
				}
				// A new handle gets a fresh object.
				m2, err := b.Mutex(ctx, "held2")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m2.TryLock(ctx); err != nil {
					t.Fatal(err)
				}
				if err := m2.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestRemoveSemaphoreFiresLost(t *testing.T) {
	for _, st := range []locktest.Suite{defaultSuite, sysvSuite} {
		t.Run(st.Name, func(t *testing.T) { testRemoveSemaphore(t, st) })
	}
}

func testRemoveSemaphore(t *testing.T, st locktest.Suite) {
	ctx := context.Background()
	b, err := st.Open(namespace(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := b.Semaphore(ctx, "gpu", 4)
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.(baton.Inspector).Remove(ctx, baton.KindSemaphore, "gpu"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost did not fire after the held semaphore was removed")
	}
	if err := s.Release(ctx, 2); !errors.Is(err, baton.ErrLost) {
		t.Errorf("Release after removal = %v, want ErrLost", err)
	}
	// A System V handle moves to a new set with all permits; a
	// shared-memory handle keeps its removed mapping, and a new handle
	// gets the new file.
	if st.Name != sysvSuite.Name {
		if s, err = b.Semaphore(ctx, "gpu", 4); err != nil {
			t.Fatal(err)
		}
	}
	h2, err := s.TryAcquire(ctx, 4)
	if err != nil {
		t.Fatalf("TryAcquire on the new set: %v", err)
	}
	if h2.Err() != nil {
		t.Errorf("a hold on the new set is reported lost: %v", h2.Err())
	}
	if err := s.Release(ctx, 4); err != nil {
		t.Fatal(err)
	}
}
