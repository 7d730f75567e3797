//go:build linux

package shmsem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
	"github.com/batonlock/baton/local/mutex"
	"github.com/batonlock/baton/locktest"
	"github.com/batonlock/baton/rwlock/shmrw"
)

// shmDriver serves the shared-memory mechanisms over a namespace directory
// (cfg), through the baton core: the futex Mutex, package shmrw's RWMutex
// and this package's Semaphore.
type shmDriver struct{ ns *ipc.Namespace }

func (d shmDriver) Kind() string                   { return "shm" }
func (d shmDriver) ValidateName(name string) error { _, err := ipc.EncodeName(name); return err }
func (d shmDriver) OpenMutex(ctx context.Context, name string) (driver.Lock, error) {
	return mutex.Open(d.ns, name)
}
func (d shmDriver) OpenRWMutex(ctx context.Context, name string) (driver.Lock, error) {
	return shmrw.Open(d.ns, name)
}
func (d shmDriver) OpenSemaphore(ctx context.Context, name string, permits int64) (driver.Semaphore, error) {
	return Open(d.ns, name, permits)
}
func (d shmDriver) OpenCond(ctx context.Context, name string) (driver.Cond, error) {
	return nil, fmt.Errorf("shm: cond: %w", baton.ErrUnsupported)
}
func (d shmDriver) Close() error { return nil }

func openBackend(cfg string) (baton.Backend, error) {
	ns, err := ipc.OpenNamespace(cfg)
	if err != nil {
		return nil, err
	}
	return baton.NewBackend(shmDriver{ns}), nil
}

var suite = locktest.Suite{
	Name: "shmsem",
	Open: openBackend,
	Caps: locktest.Caps{
		RWMutex:      true,
		Semaphore:    true,
		CrossProcess: true,
		KillBound:    100 * time.Millisecond,
		Acquisitions: 40000,
	},
	Objects: func(cfg string) ([]string, error) {
		var out []string
		for _, k := range []string{"futex", "shmrw", kind} {
			ents, err := os.ReadDir(cfg + "/" + k)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, e := range ents {
				out = append(out, k+"/"+e.Name())
			}
		}
		return out, nil
	},
}

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(runRole(role))
	}
	locktest.Main(m, suite)
}

func TestConformance(t *testing.T) {
	locktest.Run(t, suite, t.TempDir())
}
