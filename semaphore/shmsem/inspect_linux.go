//go:build linux

package shmsem

import (
	"fmt"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// Backend is the backend name reported in baton.Info.
const Backend = shm.Backend

// Inspect describes the semaphore name without changing it: its capacity,
// the permits each holding handle has (with its pid), the handles queued,
// and how many slots belong to dead processes (the next waiter reclaims
// them). It returns an error matching fs.ErrNotExist when there is no such
// semaphore and never creates one.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) {
	return shm.Inspect(ns, kind, name, size, magic, what, func(r *ipc.Region, in *baton.Info) (dead int) {
		b := r.Bytes()
		s := on(r, name)
		s.self, _ = ipc.Self()
		t := s.tickets.Load()
		in.Kind = baton.KindSemaphore
		in.Capacity = int64((*word.Uint64)(unsafe.Pointer(&b[offCap])).Load())
		in.Detail = fmt.Sprintf("tickets next %d served %d", uint32(t>>32), uint32(t))
		for i := range min(int(s.bound.Load()), maxSlots) {
			id, held, ticket := s.slotAt(i)
			v, c, tk := id.Load(), int64(held.Load()&countMask), ticket.Load()
			if v == 0 || c == 0 && tk == 0 {
				continue
			}
			if c > 0 {
				in.Holders = append(in.Holders, baton.Holder{PID: int(v & pidMask), N: c})
			}
			if tk&tHas != 0 {
				in.Waiters++
			}
			if s.dead(v) {
				dead++
			}
		}
		return dead
	})
}

// List describes every shared-memory semaphore of ns (see Inspect).
func List(ns *ipc.Namespace) ([]baton.Info, error) {
	return ipc.ListKind(ns, kind, Inspect)
}

// Remove removes the file of the semaphore name. Holders keep a mapping
// nobody else opens, and their grants' loss fires at once (ipc.PathChecker);
// later openers get a new semaphore with every permit free. It returns an
// error matching fs.ErrNotExist when there is no such semaphore.
func Remove(ns *ipc.Namespace, name string) error {
	return ipc.RemoveKind(ns, kind, name, "shmsem")
}
