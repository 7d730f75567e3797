//go:build linux

package shmqueue

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/internal/queuedetail"
	"github.com/batonlock/baton/ipc"
)

// Inspect reports on the queue name without taking its lock (a snapshot
// that may be torn by a change in progress): one holder per claimed job
// (the claimant's pid, the claim's token and time), the claimants that
// may be waiting, the last token, and the counts by state in Detail.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) {
	return shm.Inspect(ns, Kind, name, fileSize, magic, "queue", func(r *ipc.Region, in *baton.Info) (dead int) {
		q := &Queue{r: r, base: unsafe.Pointer(&r.Bytes()[0])}
		self, _ := ipc.Self()
		q.me = uint64(self.Tag())<<32 | uint64(self.PID)
		in.Kind = baton.KindQueue
		in.Waiters = int(q.u32(offSleepers).Load())
		in.LastToken = baton.Token(q.u64(offToken).Load())
		var n [stDead + 1]int
		oldest := int64(0) // ready since, of the oldest ready job
		fresh := uint32(min(q.u64(offFresh).Load(), Capacity))
		for i := uint32(0); i < fresh; i++ {
			k := q.sw(i, sState).Load() & 0xff
			if k > stDead {
				continue
			}
			n[k]++
			if k == stReady || k == stStaged {
				if d := int64(q.sw(i, sDue).Load()); d > 0 && (oldest == 0 || d < oldest) {
					oldest = d
				}
			}
			if k != stClaimed {
				continue
			}
			o := q.sw(i, sOwner).Load()
			if q.gone2(o) {
				dead++
			}
			in.Holders = append(in.Holders, baton.Holder{
				PID: int(uint32(o) & pidMask), Token: baton.Token(q.sw(i, sToken).Load()), Mode: "exclusive",
				Owner: fmt.Sprintf("job %d", q.sw(i, sID).Load()), Since: time.Unix(0, int64(q.sw(i, sDue).Load())),
			})
		}
		in.Detail = queuedetail.Format(queuedetail.Counts{Ready: n[stReady] + n[stStaged], Delayed: n[stDelayed], InFlight: n[stClaimed], Dead: n[stDead], Oldest: age(oldest)})
		return dead
	})
}

// List returns every queue of the namespace.
func List(ns *ipc.Namespace) ([]baton.Info, error) { return ipc.ListKind(ns, Kind, Inspect) }

// Remove removes the file of the queue name, with its jobs. Handles that
// hold claims keep a mapping nobody else opens, and their claims' loss
// fires within ipc.WatchEvery; later openers get an empty queue. It
// returns an error matching fs.ErrNotExist when there is no such queue.
func Remove(ns *ipc.Namespace, name string) error { return ipc.RemoveKind(ns, Kind, name, "queue") }

// age is how long ago the unix time ns was; 0 for none.
func age(ns int64) time.Duration {
	if ns == 0 {
		return 0
	}
	return max(time.Since(time.Unix(0, ns)), time.Millisecond)
}
