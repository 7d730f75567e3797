package ipc

import (
	"fmt"

	"github.com/batonlock/baton"
)

// ListMutexes describes every futex mutex of ns (see InspectMutex). Mutexes
// whose file vanishes while listing are skipped.
func ListMutexes(ns *Namespace) ([]baton.Info, error) {
	return ListKind(ns, mutexKind, InspectMutex)
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
