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
// tokens count on from the removed one's (the removal raises the
// namespace's token floor first, as a reclaim does). It returns an error
// matching fs.ErrNotExist when there is no such mutex.
func Remove(ns *ipc.Namespace, name string) error {
	return ipc.RemoveFenced(ns, Kind, name, "futex mutex", &layout)
}
