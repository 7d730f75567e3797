//go:build unix

package fence

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/ipc"
)

// The file has two slots, one block apart so that a torn write of one
// cannot touch the other. A slot is the token (little endian), a magic
// and the CRC-32C of both. An update writes the slot that does not hold
// the highest token and syncs it before the caller's write runs: a crash
// during the update leaves the other slot, with the previous highest
// token, and a torn slot that the checksum rejects; the caller's write,
// which comes after the sync, never ran with the token that was lost.
const (
	slotSize = 16
	slotGap  = 4096
	magic    = 0x6e656662 // "bfen"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// File is a fence kept in a file beside the data it protects, shared by
// every process of the host that opens the same path. The highest token is
// read, checked and advanced under an exclusive flock(2) of the file, held
// until the caller's write is done, so the check and the write are one step
// for every process and goroutine that goes through the file. A File is safe
// for concurrent use; its zero value is not usable (OpenFile).
//
// A call that finds the file locked by another process waits in the
// kernel until it gets it or its context ends. A process stopped inside Do keeps the file locked
// until it resumes or dies; its write then completes, with a token that
// was the highest when it was checked, and later writes come after it.
//
// Removing or replacing the fence file would forget the highest token: a
// File whose file is no longer at its path (a link count of 0) refuses
// every call.
type File struct {
	mu     sync.Mutex // serialises the goroutines of the handle, which flock does not tell apart; guards f
	f      *os.File
	path   string
	closed bool
}

// OpenFile opens the fence file at path, creating it (empty: no token seen)
// when it does not exist; the creation is synced with its directory, so that
// a crash cannot lose the file once a token has been written to it.
func OpenFile(path string) (*File, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: fence: empty path", baton.ErrInvalidArgument)
	}
	for {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err == nil {
			return &File{f: f, path: path}, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, os.ErrExist) {
			continue // another process created it first
		}
		if err != nil {
			return nil, err
		}
		if err := syncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, err
		}
		return &File{f: f, path: path}, nil
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Path returns the path the File was opened with.
func (f *File) Path() string { return f.path }

// Check accepts token when it is at least the highest token the file has
// seen, and records it (synced to disk); otherwise it returns a *StaleError
// and changes nothing. As Guard.Check, it does not order a write that
// follows it; use Do.
func (f *File) Check(ctx context.Context, token baton.Token) error {
	return f.Do(ctx, token, func() error { return nil })
}

// Do runs fn if token is at least the highest token the file has seen,
// with the file locked until fn returns. A token higher than the one
// recorded is written and synced before fn runs, and stays recorded
// whatever fn returns. Do returns fn's error, a *StaleError without calling
// fn, an error matching ErrCorrupt, or the context's error when it ended
// while another process held the file. fn must not use the same path's
// fence.
func (f *File) Do(ctx context.Context, token baton.Token, fn func() error) error {
	if err := checkToken(token); err != nil {
		return err
	}
	if ctx == nil || fn == nil {
		return fmt.Errorf("%w: fence: nil context or function", baton.ErrInvalidArgument)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.lock(ctx, syscall.LOCK_EX); err != nil {
		return err
	}
	defer f.unlock()
	cur, which, err := f.read()
	if err != nil {
		return err
	}
	if token < cur {
		return &StaleError{Token: token, Highest: cur}
	}
	if token > cur {
		if err := f.write(1-which, token); err != nil {
			return err
		}
	}
	return fn()
}

// Highest returns the highest token the file has seen (0 before the first).
func (f *File) Highest(ctx context.Context) (baton.Token, error) {
	if ctx == nil {
		return 0, fmt.Errorf("%w: fence: nil context", baton.ErrInvalidArgument)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.lock(ctx, syscall.LOCK_SH); err != nil {
		return 0, err
	}
	defer f.unlock()
	t, _, err := f.read()
	return t, err
}

// Close closes the file; later calls return baton.ErrClosed.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return baton.ErrClosed
	}
	f.closed = true
	return f.f.Close()
}

// lock takes the flock in mode and checks that the file is still the one
// at the path; f.mu is held.
func (f *File) lock(ctx context.Context, mode int) error {
	if f.closed {
		return baton.ErrClosed
	}
	fd := int(f.f.Fd())
	switch err := ipc.Flock(fd, mode|syscall.LOCK_NB); {
	case err == syscall.EWOULDBLOCK:
		if err := f.wait(ctx, mode); err != nil {
			return err
		}
		fd = int(f.f.Fd())
	case err != nil:
		return &os.PathError{Op: "flock", Path: f.path, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		f.unlock()
		return &os.PathError{Op: "fstat", Path: f.path, Err: err}
	}
	if st.Nlink == 0 {
		f.unlock()
		return f.replaced()
	}
	return nil
}

// wait blocks in flock(2) until the file is free (ipc.FlockWait, on a
// descriptor of its own, so that the wait can be given up when ctx ends)
// and keeps that descriptor for the file if it names the same file; f.mu is
// held.
func (f *File) wait(ctx context.Context, mode int) error {
	nf, err := ipc.FlockWait(ctx, f.path, 0, mode)
	if errors.Is(err, os.ErrNotExist) {
		return f.replaced()
	}
	if err != nil {
		return err
	}
	var was, now syscall.Stat_t
	if err := errors.Join(syscall.Fstat(int(f.f.Fd()), &was), syscall.Fstat(int(nf.Fd()), &now)); err != nil {
		nf.Close()
		return &os.PathError{Op: "fstat", Path: f.path, Err: err}
	}
	if was.Dev != now.Dev || was.Ino != now.Ino {
		nf.Close() // closing gives its lock back
		return f.replaced()
	}
	f.f.Close()
	f.f = nf
	return nil
}

func (f *File) replaced() error {
	return fmt.Errorf("fence: %s was removed or replaced: its highest token is no longer kept", f.path)
}

func (f *File) unlock() { _ = syscall.Flock(int(f.f.Fd()), syscall.LOCK_UN) }

// read returns the highest valid token of the two slots and the slot that
// holds it (0 when both are empty).
func (f *File) read() (baton.Token, int, error) {
	var vals [2]baton.Token
	var torn [2]bool
	for i := range 2 {
		var b [slotSize]byte
		n, err := f.f.ReadAt(b[:], int64(i*slotGap))
		if err != nil && err != io.EOF {
			return 0, 0, err
		}
		vals[i], torn[i] = decodeSlot(b[:n])
	}
	if torn[0] && torn[1] {
		return 0, 0, fmt.Errorf("%w: %s", ErrCorrupt, f.path)
	}
	if vals[1] > vals[0] {
		return vals[1], 1, nil
	}
	return vals[0], 0, nil
}

// decodeSlot returns a slot's token (0 for a slot never written) or
// reports it torn.
func decodeSlot(b []byte) (t baton.Token, torn bool) {
	if !slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
		return 0, false
	}
	if len(b) != slotSize || binary.LittleEndian.Uint32(b[8:]) != magic ||
		crc32.Checksum(b[:12], crcTable) != binary.LittleEndian.Uint32(b[12:]) {
		return 0, true
	}
	return baton.Token(binary.LittleEndian.Uint64(b)), false
}

func (f *File) write(slot int, t baton.Token) error {
	var b [slotSize]byte
	binary.LittleEndian.PutUint64(b[:], uint64(t))
	binary.LittleEndian.PutUint32(b[8:], magic)
	binary.LittleEndian.PutUint32(b[12:], crc32.Checksum(b[:12], crcTable))
	if _, err := f.f.WriteAt(b[:], int64(slot*slotGap)); err != nil {
		return err
	}
	return f.f.Sync()
}
