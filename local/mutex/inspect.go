package mutex

import (
	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// List describes every futex mutex of ns (see Inspect). Mutexes
// whose file vanishes while listing are skipped.
func List(ns *ipc.Namespace) ([]baton.Info, error) {
	return ipc.ListKind(ns, Kind, Inspect)
}

// Remove removes the file of the futex mutex name. A process that holds
// it keeps a mapping nobody else will open, and its grants' losses fire
// within ipc.WatchEvery; later openers get a new, unlocked mutex whose
// tokens start again from the namespace's token floor (which a removal,
// unlike a reclaim, does not raise). It returns an error matching
// fs.ErrNotExist when there is no such mutex.
func Remove(ns *ipc.Namespace, name string) error {
	return ipc.RemoveKind(ns, Kind, name, "futex mutex")
}
