package rwlock

import (
	"fmt"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// Inspect reports on the lock called name: who holds it (a writer, or the
// number of readers; the kernel does not tell which processes), how many
// processes wait, and the last fencing token. A name without a lock gives
// an error matching fs.ErrNotExist.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) {
	in, rec, set, err := ipc.InspectSet(ns, ipc.KindSysvRW, baton.KindRWMutex, name)
	if err != nil || set == nil {
		return in, err
	}
	var vals [nsems]int
	waiters := 0
	for i := range vals {
		if vals[i], err = set.Value(i); err != nil {
			return in, err
		}
		n, z, err := set.Waiting(i)
		if err != nil {
			return in, err
		}
		waiters += n + z
	}
	in.Waiters = waiters
	if vals[semW] > 0 {
		// A completed semop records its caller's pid on every semaphore it
		// touches, and no operation on semW completes while a writer
		// holds: the last pid of semW is the writer's.
		h := baton.Holder{Mode: driver.Exclusive.String(), Token: baton.Token(rec.Counter)}
		if pid, err := set.LastPID(semW); err == nil && pid > 0 {
			h.PID = pid
		}
		in.Holders = append(in.Holders, h)
	}
	if vals[semR] > 0 {
		in.Holders = append(in.Holders, baton.Holder{Mode: driver.Shared.String(), N: int64(vals[semR])})
	}
	in.Detail += fmt.Sprintf(" writers-waiting %d", vals[semWW])
	in.LastToken = baton.Token(rec.Counter)
	return in, nil
}

// List reports on every read-write lock of the namespace.
func List(ns *ipc.Namespace) ([]baton.Info, error) {
	return ipc.ListKind(ns, ipc.KindSysvRW, Inspect)
}

// Remove removes the lock called name: its System V set and its record.
// Holders see their Release fail with baton.ErrLost; waiters move to the set
// that the next Open creates. A name without a lock gives an error matching
// fs.ErrNotExist.
func Remove(ns *ipc.Namespace, name string) error {
	return ipc.Remove(ns, ipc.KindSysvRW, name)
}
