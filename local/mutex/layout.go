package mutex

import (
	"sync/atomic"
	"unsafe"

	"github.com/batonlock/baton/internal/word"
	"github.com/batonlock/baton/ipc"
)

// layout is the file of a futex mutex: idle, so reclaimed at the last
// close in the host, when no process owns it (a dead owner's hold stays
// for a waiter to recover, with its grant reporting Recovered).
var layout = ipc.Layout{Kind: Kind, Size: mutexSize, Magic: mutexMagic, Fence: offFence, Last: lastToken, Idle: func(b []byte) bool {
	s := (*word.Uint64)(unsafe.Pointer(&b[offState])).Load()
	return uint32(s)&pidMask == 0
}}

// lastToken returns the last token given by the mutex whose file is b:
// the holder's, or the one before the next.
func lastToken(b []byte) uint64 {
	s := (*word.Uint64)(unsafe.Pointer(&b[offState])).Load()
	t := word.TokenOf(atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[offFence]))), s)
	if uint32(s)&pidMask == 0 {
		t-- // free: the next token less one
	}
	return t
}
