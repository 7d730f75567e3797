//go:build linux

package mutex

import (
	"errors"

	"github.com/batonlock/baton/ipc"
)

// The watch of a handle's file (ipc.InodeChecker): a handle whose file is
// removed or replaced loses its holds.

// CheckLoss reports whether the handle's file was removed or replaced
// (ipc.Checker).
func (m *Mutex) CheckLoss() error {
	dev, ino := m.r.DevIno()
	if !ipc.Named(m.r.Path(), dev, ino) {
		m.gone.Store(true)
		m.r.Forget()
		return errMutexRemoved
	}
	return nil
}

// WatchedPath returns the path of the handle's file, which the watcher
// follows with inotify (ipc.PathChecker).
func (m *Mutex) WatchedPath() string { return m.r.Path() }

// WatchedInode returns the device and inode of the handle's file: handles
// on one name share the process's watch of it (ipc.InodeChecker).
func (m *Mutex) WatchedInode() (dev, ino uint64) { return m.r.DevIno() }

var errMutexRemoved = errors.New("file removed or replaced")
