//go:build linux

package mutex

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/host/shm"
	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// Inspect describes the futex mutex name without changing it: its
// holder (pid and its token), the last token given, whether the
// holder is dead (Detail "owner dead": the next waiter recovers it), and the
// number of handles waiting, which is approximate (a waiter killed while
// waiting is still counted). It returns an error matching fs.ErrNotExist
// when there is no such mutex; it never creates one.
func Inspect(ns *ipc.Namespace, name string) (baton.Info, error) {
	r, err := shm.OpenExisting(ns, Kind, name, mutexSize, mutexMagic, what)
	if err != nil {
		return baton.Info{}, err
	}
	defer r.Close()
	m := &Mutex{r: r}
	if self, err := ipc.Self(); err == nil {
		m.me = uint64(self.Tag())<<32 | uint64(self.PID)
	}
	s := m.state().Load()
	last := lastToken(unsafe.Slice((*byte)(m.r.Base()), mutexSize))
	info := baton.Info{
		Name:      name,
		Kind:      baton.KindMutex,
		Impl:      "futex",
		Holders:   []baton.Holder{},
		Waiters:   max(int(m.wait().Load()), 0),
		LastToken: baton.Token(last),
		Detail:    fmt.Sprintf("state %#016x", s),
	}
	lo := uint32(s)
	if pid := int(lo & pidMask); pid != 0 {
		h := baton.Holder{PID: pid, Token: baton.Token(last), Mode: "exclusive"}
		// The owner slot holds the Owner of a hold taken on the word (0:
		// none), or word.Driver for one the driver gave, whose owner only
		// the holding process knows.
		if o := atomic.LoadUint64(m.slot()); o != 0 && o != word.Driver {
			h.Owner = strconv.FormatUint(o, 10)
		}
		info.Holders = append(info.Holders, h)
		if m.ownerGone(s) {
			info.Detail += ", owner dead"
		}
	} else if lo&fHandoff != 0 {
		info.Detail += ", being handed to a waiter"
	}
	return info, nil
}
