package semaphore

import (
	"fmt"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// Inspect reports on the semaphore called name: its capacity, the permits
// held (as one Holder, since the kernel does not tell which process holds
// which), and the number of waiting processes. A name without a semaphore
// gives an error matching fs.ErrNotExist.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) {
	in, rec, set, err := ipc.InspectSet(ns, ipc.KindSysvSem, baton.KindSemaphore, name)
	in.Capacity = rec.Param
	if err != nil || set == nil {
		return in, err
	}
	v, err := set.Value(0)
	if err != nil {
		return in, err
	}
	ncnt, _, err := set.Waiting(0)
	if err != nil {
		return in, err
	}
	in.Waiters = ncnt
	if held := rec.Param - int64(v); held > 0 {
		in.Holders = append(in.Holders, baton.Holder{N: held})
	}
	if pid, err := set.LastPID(0); err == nil && pid > 0 {
		in.Detail += fmt.Sprintf(" last-op pid %d", pid)
	}
	return in, nil
}

// List reports on every semaphore of the namespace.
func List(ns *ipc.Namespace) ([]baton.Info, error) {
	return ipc.ListKind(ns, ipc.KindSysvSem, Inspect)
}

// Remove removes the semaphore called name: its System V set and its record.
// Holders see their Release fail with baton.ErrLost; waiters move to the set
// that the next Open creates. A name without a semaphore gives an error
// matching fs.ErrNotExist.
func Remove(ns *ipc.Namespace, name string) error {
	return ipc.Remove(ns, ipc.KindSysvSem, name)
}
