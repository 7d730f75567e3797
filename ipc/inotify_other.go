//go:build !linux

package ipc

// Without inotify every registration is checked every WatchEvery.
func inotifyAdd(pc PathChecker, w *Watch) int { return -1 }
func inotifyRemove(wd int, w *Watch)          {}
func inotifyClose()                           {}
