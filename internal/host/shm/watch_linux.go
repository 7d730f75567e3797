package shm

import (
	"sync/atomic"

	"github.com/batonlock/baton/driver"
	"github.com/batonlock/baton/ipc"
)

// WatchFile watches the file of r for a handle whose holds are lost once
// that file is removed or replaced (Remove, baton rm): its mapping is then
// shared with no new opener, so from then on gone is set and loss fires
// with removed. It returns the file's device and inode (which name the
// lock to the race detector) and the watch's stop.
func WatchFile(r *ipc.Region, gone *atomic.Bool, loss *driver.Loss, removed error) (dev, ino uint64, stop func(), err error) {
	path := r.Path()
	dev, ino = r.DevIno()
	stop = ipc.WatchFileLoss(path, func() error {
		if !ipc.Named(path, dev, ino) {
			gone.Store(true)
			r.Forget()
			return removed
		}
		return nil
	}, loss)
	return dev, ino, stop, nil
}

// Attach completes the opening of a handle on the slot table in r, its
// header checked: it watches r's file as WatchFile does, then claims the
// handle's slot. Either failing closes r (and stops the watch). It returns
// the slot, the watch's stop and the file's race-detector word (RaceSync).
func Attach(r *ipc.Region, gone *atomic.Bool, loss *driver.Loss, removed error, claim func() (int, error)) (slot int, stop func(), rsync *atomic.Uint64, err error) {
	dev, ino, stop, err := WatchFile(r, gone, loss, removed)
	if err != nil {
		r.Close()
		return 0, nil, nil, err
	}
	if slot, err = claim(); err != nil {
		stop()
		r.Close()
		return 0, nil, nil, err
	}
	return slot, stop, RaceSync(dev, ino), nil
}
