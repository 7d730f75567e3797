//go:build linux

package condvar

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// Inspect describes the condition variable name: the number of slots in use
// (live waiters, plus slots of dead ones not yet swept) in Waiters. It
// returns an error matching fs.ErrNotExist when there is none, and creates
// nothing.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) {
	if _, err := ns.Path(Kind, name); err != nil {
		return baton.Info{}, err
	}
	r, err := ipc.OpenExistingRegion(ns, Kind, name, fileSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return baton.Info{}, fmt.Errorf("condvar: %q: %w", name, fs.ErrNotExist)
		}
		return baton.Info{}, err
	}
	defer r.Close()
	c := newCond(r)
	return baton.Info{Name: name, Kind: baton.KindCond, Impl: "futex", Holders: []baton.Holder{}, Waiters: c.inUse()}, nil
}

// List describes every condition variable of ns.
func List(ns *ipc.Namespace) ([]baton.Info, error) {
	return ipc.ListKind(ns, Kind, Inspect)
}

// Remove removes the file of the condition variable name. Waiters that
// still use it keep waiting on a mapping no new opener sees: wake them
// first. It returns an error matching fs.ErrNotExist when there is none.
func Remove(ns *ipc.Namespace, name string) error {
	return ipc.RemoveKind(ns, Kind, name, "condvar:")
}
