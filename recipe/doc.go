// Package recipe builds coordination recipes on the primitives of package
// baton, once for every Backend: a MultiLock that takes several names
// (possibly on several Backends) as one lock, without deadlock.
//
// The package imports only package baton, so a same-host program that uses
// it with package local links no network client.
package recipe
