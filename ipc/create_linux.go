//go:build linux

package ipc

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// create makes the file of e whole before it has a name (sized, its magic
// and token counter written), takes its shared flock, and links it. It
// returns unix.EEXIST when another opener linked first.
func create(e Entry, lay *Layout) (*shared, error) {
	if err := e.ns.ensureKindOnce(e.kind); err != nil {
		return nil, err
	}
	var floor *atomic.Uint64
	if lay.Fence > 0 {
		f, err := tokenFloor(e.ns)
		if err != nil {
			return nil, err
		}
		floor = f
	}
	fd, tmp, err := unnamed(filepath.Dir(e.path))
	if err == unix.ENOENT { // the directory was removed since it was made
		if err = e.ns.EnsureKind(e.kind); err == nil {
			fd, tmp, err = unnamed(filepath.Dir(e.path))
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: e.path, Err: err}
	}
	var (
		addr unsafe.Pointer
		ch   *chunk
	)
	fail := func(op string, err error) (*shared, error) {
		if addr != nil {
			unmapFile(addr, lay.Size, ch)
		}
		if tmp != "" {
			unix.Unlink(tmp)
		}
		unix.Close(fd)
		if err == unix.EEXIST {
			return nil, err
		}
		return nil, &fs.PathError{Op: op, Path: e.path, Err: err}
	}
	// Held from before the link: no reclaim can take the file between
	// its link and its first handle.
	if err := Flock(fd, unix.LOCK_SH); err != nil {
		return fail("flock", err)
	}
	// A small file gets its size and first words in one write.
	if lay.Size <= smallFile {
		var b [smallFile]byte
		*(*uint32)(unsafe.Pointer(&b[0])) = lay.Magic
		if floor != nil {
			*(*uint64)(unsafe.Pointer(&b[lay.Fence])) = floor.Load()
		}
		_, err = unix.Pwrite(fd, b[:lay.Size], 0)
	} else {
		err = unix.Ftruncate(fd, int64(lay.Size))
	}
	if err != nil {
		return fail("write", err)
	}
	if addr, ch, err = mapFile(fd, lay.Size); err != nil {
		return fail("mmap", err)
	}
	if lay.Size > smallFile {
		(*atomic.Uint32)(addr).Store(lay.Magic)
		if floor != nil {
			atomic.StoreUint64((*uint64)(unsafe.Add(addr, lay.Fence)), floor.Load())
		}
	}
	if tmp != "" {
		err = unix.Link(tmp, e.path)
		unix.Unlink(tmp)
		tmp = ""
	} else {
		err = linkUnnamed(fd, e.path)
	}
	if err != nil {
		return fail("link", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail("stat", err)
	}
	sh := &shared{ns: e.ns, name: e.name, lay: lay, addr: addr, ch: ch, dev: uint32(st.Dev), ino: st.Ino, fd: int32(fd)}
	sh.raiseFence(floor)
	return sh, nil
}

// smallFile is the largest file create writes whole.
const smallFile = 256

// unnamed opens a new file in dir that has no name yet (O_TMPFILE); where
// the file system has none, a file under a temporary name that no encoded
// name can have (tmp, for the caller to remove).
func unnamed(dir string) (fd int, tmp string, err error) {
	if procFD() {
		fd, err = openNoEINTR(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err == nil {
			return fd, "", nil
		}
	}
	var rnd [4]byte
	for {
		if _, err := unix.Getrandom(rnd[:], 0); err != nil {
			return -1, "", err
		}
		tmp = filepath.Join(dir, fmt.Sprintf("%%new%x", rnd))
		fd, err = openNoEINTR(tmp, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != unix.EEXIST {
			return fd, tmp, err
		}
	}
}

// linkUnnamed gives the unnamed file at fd the name path: by the
// descriptor itself where the kernel lets its opener do so (Linux 6.10 and
// later, or a process with CAP_DAC_READ_SEARCH), which spares the walk
// through /proc/self/fd that the older way takes.
func linkUnnamed(fd int, path string) error {
	if !noEmptyPath.Load() {
		err := unix.Linkat(fd, "", unix.AT_FDCWD, path, unix.AT_EMPTY_PATH)
		switch {
		case err == unix.ENOENT && unix.Access(filepath.Dir(path), unix.F_OK) != nil:
			return err // the directory is gone
		case err != unix.ENOENT && err != unix.EPERM:
			return err
		}
		// Refused: older kernels answer ENOENT to a process without
		// CAP_DAC_READ_SEARCH.
		noEmptyPath.Store(true)
	}
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
}

// noEmptyPath: linkat refused AT_EMPTY_PATH to this process once.
var noEmptyPath atomic.Bool

// procFD reports whether /proc/self/fd can link an unnamed file.
var procFD = sync.OnceValue(func() bool {
	var st unix.Stat_t
	return unix.Stat("/proc/self/fd", &st) == nil
})

// ensured remembers the kind directories made.
var ensured sync.Map // sharedKey → struct{}

func (ns *Namespace) ensureKindOnce(kind string) error {
	key := sharedKey{ns.dir, kind}
	if _, ok := ensured.Load(key); ok {
		return nil
	}
	if err := ns.EnsureKind(kind); err != nil {
		return err
	}
	ensured.Store(key, struct{}{})
	return nil
}
