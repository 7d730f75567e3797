//go:build linux

package shmrw

import (
	"fmt"
	"sync/atomic"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/ipc"
)

// Backend is the backend name reported in baton.Info.
const Backend = shm.Backend

// Inspect describes the lock name without changing it: the writer (pid
// and the last token, which is the writer's), the pid of each handle that
// reads (once per handle, however many of its goroutines read), and the
// live handles waiting to write (a writer still draining readers counts
// as waiting; waiting readers are not counted). Readers and waiting
// writers of dead processes are only counted in Detail; the next waiter
// reclaims them. It returns an error matching
// fs.ErrNotExist when there is no such lock and never creates one.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) {
	return shm.Inspect(ns, kind, name, size, magic, what, func(r *ipc.Region, in *baton.Info) (dead int) {
		l := on(r, name)
		l.self, _ = ipc.Self()
		l.idx = -1
		s := l.state.Load()
		last := atomic.LoadUint64(l.fence)
		in.Kind = baton.KindRWMutex
		in.LastToken = baton.Token(last)
		in.Detail = fmt.Sprintf("state %#016x", s)
		if pid := int(s & pidMask); pid != 0 {
			if s&fDrain != 0 {
				in.Waiters++
			} else {
				in.Holders = append(in.Holders, baton.Holder{PID: pid, Token: baton.Token(last), Mode: driver.Exclusive.String()})
			}
			if l.dead(s) {
				dead++
			}
		}
		for i := range min(int(l.bound.Load()), maxSlots) {
			v := l.slotAt(i).Load()
			n := l.countAt(i).Load() & countLow
			if v&(sRead|sWrite) == 0 && n == 0 {
				continue
			}
			if l.dead(v) {
				dead++
				continue
			}
			if v&sRead != 0 || n != 0 {
				in.Holders = append(in.Holders, baton.Holder{PID: int(v & pidMask), Mode: driver.Shared.String()})
			}
			if v&sWrite != 0 {
				in.Waiters++
			}
		}
		return dead
	})
}

// List describes every shared-memory rwlock of ns (see Inspect).
func List(ns *ipc.Namespace) ([]baton.Info, error) {
	return ipc.ListKind(ns, kind, Inspect)
}

// Remove removes the file of the lock name. Holders keep a mapping nobody
// else opens, and their grants' loss fires at once (ipc.PathChecker); later
// openers get a new, free lock whose tokens count on from the removed
// one's (the removal raises the namespace's token floor first). It
// returns an error matching fs.ErrNotExist when there is no such lock.
func Remove(ns *ipc.Namespace, name string) error {
	return ipc.RemoveFenced(ns, kind, name, "shmrw", &layout)
}
