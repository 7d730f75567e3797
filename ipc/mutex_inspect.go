package ipc

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/batonlock/baton"
)

// ListMutexes describes every futex mutex of ns (see InspectMutex). Mutexes
// whose file vanishes while listing are skipped.
func ListMutexes(ns *Namespace) ([]baton.Info, error) {
	names, err := ns.Names(mutexKind)
	if err != nil {
		return nil, err
	}
	infos := make([]baton.Info, 0, len(names))
	for _, n := range names {
		info, err := InspectMutex(ns, n)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// RemoveMutex removes the file of the futex mutex name. A process that holds
// it keeps a mapping nobody else will open, and is not told; later openers
// get a new, unlocked mutex whose tokens start again from 1. It returns an
// error matching fs.ErrNotExist when there is no such mutex.
func RemoveMutex(ns *Namespace, name string) error {
	if err := RemoveRegion(ns, mutexKind, name); err != nil {
		return fmt.Errorf("ipc: futex mutex %q: %w", name, err)
	}
	return nil
}
