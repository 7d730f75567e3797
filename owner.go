package baton

import (
	"context"
	"sync/atomic"
)

// Owner identifies who holds a lock for the purpose of reentrancy. Go has no
// thread identity, so an owner travels in the context: every call made with a
// context derived from the same WithOwner call acts as the same owner.
//
// The zero Owner means "no owner": such holds behave like sync.Mutex, where a
// second Lock waits even from the same goroutine.
type Owner uint64

type ownerKey struct{}

var lastOwner atomic.Uint64

// WithOwner returns a copy of parent that carries a new, process-unique
// Owner. Locks taken with the returned context (or any context derived from
// it) are reentrant: Lock by the owner that already holds increments a hold
// count, and each Lock needs its Unlock.
func WithOwner(parent context.Context) context.Context {
	return context.WithValue(parent, ownerKey{}, Owner(lastOwner.Add(1)))
}

// OwnerOf returns the Owner carried by ctx, or the zero Owner.
func OwnerOf(ctx context.Context) Owner {
	if ctx == nil || lastOwner.Load() == 0 {
		// Until WithOwner is first called no context carries an owner,
		// and the walk up ctx's chain can be skipped.
		return 0
	}
	return ownerIn(ctx)
}

// ownerIn is kept out of line so that OwnerOf inlines.
//
//go:noinline
func ownerIn(ctx context.Context) Owner {
	o, _ := ctx.Value(ownerKey{}).(Owner)
	return o
}
