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
// next waiter behind them recovers them); for a one-to-one channel, the
// processes that hold its ends (Holders, Mode "sending end" or
// "receiving end"), and ends of dead processes as its dead. It returns an error matching
// fs.ErrNotExist when there is no such channel.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) {
	path, err := ns.Path(Kind, name)
	if err != nil {
		return baton.Info{}, err
	}
	p := readParams(path)
	capacity, maxMsg := int(p>>32), int(uint32(p)&^oneFlag)
	size := hdrSize
	if p != 0 {
		size = FileSize(capacity, maxMsg, p&oneFlag != 0)
	}
	self, _ := ipc.Self()
	in, err := shm.Inspect(ns, Kind, name, size, magic, "channel", func(r *ipc.Region, in *baton.Info) (dead int) {
		c := newChan(r, capacity, maxMsg, p&oneFlag != 0, self)
		in.Kind, in.Capacity, in.Waiters = KindChannel, int64(capacity), -1
		if p == 0 {
			in.Detail = "being created"
			return 0
		}
		if p&oneFlag != 0 {
			held, ends := c.inspectOne()
			in.Detail = fmt.Sprintf("%d of %d messages, up to %d bytes each, one-to-one", held, capacity, maxMsg)
			for i, o := range ends {
				if o == 0 {
					continue
				}
				if e := c.entry(uint64(o)).Load(); c.deadEntry(e) {
					dead++
				} else {
					in.Holders = append(in.Holders, baton.Holder{PID: int(uint32(e)), Mode: [2]string{"sending end", "receiving end"}[i]})
				}
			}
			if c.closed() {
				in.Detail += ", closed"
			}
			return dead
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
