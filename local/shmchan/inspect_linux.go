//go:build linux

package shmchan

import (
	"fmt"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// KindChannel is baton.KindChannel, the kind Inspect reports.
const KindChannel = baton.KindChannel

// Inspect describes the channel name of ns without opening a handle:
// its capacity, how many messages it holds, its largest message, whether
// it is closed, and how many slots processes that died still hold (the
// next waiter behind them recovers them). It returns an error matching
// fs.ErrNotExist when there is no such channel.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) {
	path, err := ns.Path(Kind, name)
	if err != nil {
		return baton.Info{}, err
	}
	p := readParams(path)
	capacity, maxMsg := int(p>>32), int(uint32(p))
	size := hdrSize
	if p != 0 {
		size = FileSize(capacity, maxMsg)
	}
	self, _ := ipc.Self()
	in, err := shm.Inspect(ns, Kind, name, size, magic, "channel", func(r *ipc.Region, in *baton.Info) (dead int) {
		c := &Chan{r: r, base: unsafe.Pointer(&r.Bytes()[0]), capacity: uint64(max(capacity, 1)), maxMsg: maxMsg,
			slotSize: uintptr(SlotBytes(maxMsg)), self: self}
		in.Kind, in.Capacity, in.Waiters = KindChannel, int64(capacity), -1
		if p == 0 {
			in.Detail = "being created"
			return 0
		}
		held := 0
		for pos := range c.capacity {
			v := c.state(pos).Load()
			if phaseOf(v) != phaseEmpty {
				held++
			}
			if o := ownerOf(v); o != 0 && c.deadEntry(c.entry(o).Load()) {
				dead++
			}
		}
		in.Detail = fmt.Sprintf("%d of %d messages, up to %d bytes each", held, capacity, maxMsg)
		if (*word.Uint32)(unsafe.Add(c.base, offClosed)).Load() != 0 {
			in.Detail += ", closed"
		}
		return dead
	})
	return in, err
}

// List describes every channel of ns (see Inspect).
func List(ns *ipc.Namespace) ([]baton.Info, error) { return ipc.ListKind(ns, Kind, Inspect) }

// Remove removes the file of the channel name: handles still open see
// every call fail with an error matching baton.ErrLost, and a later
// opener makes a new, empty channel. It returns an error matching
// fs.ErrNotExist when there is no such channel.
func Remove(ns *ipc.Namespace, name string) error { return ipc.RemoveKind(ns, Kind, name, "channel") }
