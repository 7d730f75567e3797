package local_test

import (
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonlock/baton"
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

var flockSuite = locktest.Suite{
	Name:    "local-flock",
	Open:    func(dir string) (baton.Backend, error) { return local.Open(dir) },
	Objects: objects,
	Caps: locktest.Caps{
		RWMutex:      true,
		CrossProcess: true,
		KillBound:    100 * time.Millisecond,
	},
}

func TestMain(m *testing.M) { locktest.Main(m, flockSuite, sysvSuite) }

func TestFlockConformance(t *testing.T) { locktest.Run(t, flockSuite, t.TempDir()) }

var sysvSuite = locktest.Suite{
	Name: "local-sysv",
	Open: func(dir string) (baton.Backend, error) {
		return local.Open(dir, local.WithMutex(local.MutexFlock), local.WithRWMutex(local.RWSysV))
	},
	Objects: objects,
	Caps: locktest.Caps{
		RWMutex:      true,
		Semaphore:    true,
		CrossProcess: true,
		KillBound:    100 * time.Millisecond,
	},
}

func TestSysVConformance(t *testing.T) { locktest.Run(t, sysvSuite, t.TempDir()) }
