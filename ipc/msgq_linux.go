//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package ipc

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/batonlock/baton"
)

// MsgQueue is a System V message queue opened by name in a namespace. Its
// messages outlive the processes that sent them, until received or until
// the queue is removed (RemoveMsgQueue, RemoveAll). The zero value is not
// usable; use OpenMsgQueue. A MsgQueue is safe for concurrent use.
//
// Messages of one type are received in the order they were sent, from
// every process.
type MsgQueue struct {
	obj     *Object
	maxSize int
	mu      sync.Mutex // guards closed
	closed  bool
}

// MsgMax returns the system's largest message body (kernel.msgmax).
func MsgMax() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/msgmax")
	if err != nil {
		return 0, fmt.Errorf("ipc: msgmax: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("ipc: msgmax: %w", err)
	}
	return n, nil
}

// OpenMsgQueue opens the queue called name, creating it when missing (or
// when its queue was removed), for message bodies of at most maxSize bytes
// (1 to MsgMax()). Every opener must ask for the same maxSize (an error
// matching baton.ErrMismatch otherwise). Bad arguments give errors matching
// baton.ErrInvalidName or baton.ErrInvalidArgument and create nothing.
func OpenMsgQueue(ns *Namespace, name string, maxSize int) (*MsgQueue, error) {
	if _, err := EncodeName(name); err != nil {
		return nil, err
	}
	msgmax, err := MsgMax()
	if err != nil {
		return nil, err
	}
	if maxSize <= 0 || maxSize > msgmax {
		return nil, fmt.Errorf("%w: message size %d, must be 1 to %d (kernel.msgmax)", baton.ErrInvalidArgument, maxSize, msgmax)
	}
	obj, err := openObject(ns, KindMsgQ, name, 0, int64(maxSize), msgClass, nil)
	if err != nil {
		return nil, err
	}
	return &MsgQueue{obj: obj, maxSize: maxSize}, nil
}

// RemoveMsgQueue removes the queue called name and its messages.
func RemoveMsgQueue(ns *Namespace, name string) error { return Remove(ns, KindMsgQ, name) }

// MaxSize returns the largest message body the queue takes.
func (q *MsgQueue) MaxSize() int { return q.maxSize }

// ID returns the kernel id of the queue.
func (q *MsgQueue) ID() int { return q.obj.ID }

func (q *MsgQueue) check() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return fmt.Errorf("ipc: message queue %q: %w", q.obj.Name, baton.ErrClosed)
	}
	return nil
}

// Send puts a message of type typ (> 0) with body into the queue, waiting
// while the queue is full, until ctx is done. On failure nothing was sent.
// A body longer than MaxSize gives an error matching
// baton.ErrInvalidArgument.
func (q *MsgQueue) Send(ctx context.Context, typ int64, body []byte) error {
	if err := checkSend(typ, body, q.maxSize); err != nil {
		return err
	}
	if err := q.check(); err != nil {
		return err
	}
	buf := make([]byte, 8+len(body))
	binary.NativeEndian.PutUint64(buf, uint64(typ))
	copy(buf[8:], body)
	id := q.obj.ID
	call := func(flags int) unix.Errno {
		_, _, e := unix.Syscall6(unix.SYS_MSGSND, uintptr(id), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(body)), uintptr(flags), 0, 0)
		return e
	}
	e := call(unix.IPC_NOWAIT)
	if e != unix.EAGAIN {
		return msgErr(id, e)
	}
	return blocking(ctx, func() unix.Errno { return call(0) }, func(e unix.Errno) error { return msgErr(id, e) })
}

// Receive takes the first message that matches typ, waiting until there is
// one or ctx is done: typ 0 takes the first message of any type, typ > 0
// the first of that type, typ < 0 the first of the lowest type <= -typ. On
// failure nothing was taken.
func (q *MsgQueue) Receive(ctx context.Context, typ int64) (Message, error) {
	if err := q.check(); err != nil {
		return Message{}, err
	}
	buf := make([]byte, 8+q.maxSize)
	id := q.obj.ID
	var n uintptr
	call := func(flags int) unix.Errno {
		r, _, e := unix.Syscall6(unix.SYS_MSGRCV, uintptr(id), uintptr(unsafe.Pointer(&buf[0])), uintptr(q.maxSize), uintptr(typ), uintptr(flags), 0)
		n = r
		return e
	}
	e := call(unix.IPC_NOWAIT)
	var err error
	if e == unix.ENOMSG {
		err = blocking(ctx, func() unix.Errno { return call(0) }, func(e unix.Errno) error { return msgErr(id, e) })
	} else {
		err = msgErr(id, e)
	}
	if err != nil {
		return Message{}, err
	}
	return Message{Type: int64(binary.NativeEndian.Uint64(buf)), Body: buf[8 : 8+n : 8+n]}, nil
}

// TryReceive is Receive without waiting: it returns ErrWouldBlock when no
// message matches.
func (q *MsgQueue) TryReceive(typ int64) (Message, error) {
	if err := q.check(); err != nil {
		return Message{}, err
	}
	buf := make([]byte, 8+q.maxSize)
	r, _, e := unix.Syscall6(unix.SYS_MSGRCV, uintptr(q.obj.ID), uintptr(unsafe.Pointer(&buf[0])), uintptr(q.maxSize), uintptr(typ), uintptr(unix.IPC_NOWAIT), 0)
	if e == unix.ENOMSG {
		return Message{}, ErrWouldBlock
	}
	if e != 0 {
		return Message{}, msgErr(q.obj.ID, e)
	}
	return Message{Type: int64(binary.NativeEndian.Uint64(buf)), Body: buf[8 : 8+r : 8+r]}, nil
}

// Stat returns IPC_STAT of the queue.
func (q *MsgQueue) Stat() (MsgStat, error) { return StatMsgQueue(q.obj.ID) }

// Close closes the handle; the queue and its messages stay.
func (q *MsgQueue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	return q.obj.Close()
}

func msgErr(id int, e unix.Errno) error {
	switch e {
	case 0:
		return nil
	case unix.EAGAIN, unix.ENOMSG:
		return ErrWouldBlock
	case unix.EIDRM, unix.EINVAL:
		return fmt.Errorf("%w (message queue %d): %w", ErrRemoved, id, e)
	case unix.E2BIG:
		return fmt.Errorf("%w: ipc: message on queue %d larger than the receive buffer: %w", baton.ErrInvalidArgument, id, e)
	case unix.EACCES:
		return fmt.Errorf("ipc: message queue %d: permission denied: %w", id, e)
	default:
		return fmt.Errorf("ipc: message queue %d: %w", id, e)
	}
}

// createMsgQueueKey creates a queue with key, which must be free: an
// error matching unix.EEXIST says it is not.
func createMsgQueueKey(key int32) (int, error) {
	r, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(key), uintptr(unix.IPC_CREAT|unix.IPC_EXCL|0o600), 0)
	switch e {
	case 0:
		return int(r), nil
	case unix.ENOSPC:
		return 0, fmt.Errorf("ipc: msgget: the system limit of message queues is reached (kernel.msgmni; see ipcs -q): %w", e)
	default:
		return 0, fmt.Errorf("ipc: msgget: %w", e)
	}
}

// msgQueueByKey returns the id of the queue with key, if there is one.
func msgQueueByKey(key int32) (int, bool) {
	r, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(key), 0, 0)
	return int(r), e == 0
}

// StatMsgQueue returns IPC_STAT of the queue id.
func StatMsgQueue(id int) (MsgStat, error) {
	var buf [32]uint64 // larger than struct msqid64_ds, 8-byte aligned
	if _, _, e := unix.Syscall(unix.SYS_MSGCTL, uintptr(id), uintptr(unix.IPC_STAT), uintptr(unsafe.Pointer(&buf))); e != 0 {
		return MsgStat{}, msgErr(id, e)
	}
	perm := (*unix.SysvIpcPerm)(unsafe.Pointer(&buf))
	// struct msqid64_ds on 64-bit Linux: perm (48 bytes), stime, rtime,
	// ctime, cbytes, qnum, qbytes, then lspid and lrpid as 32-bit ints.
	w := buf[6:]
	return MsgStat{
		Key:    perm.Key,
		UID:    perm.Uid,
		CUID:   perm.Cuid,
		Mode:   perm.Mode & 0o777,
		CBytes: int(w[3]),
		QNum:   int(w[4]),
		QBytes: int(w[5]),
		LSPid:  int(int32(w[6])),
		LRPid:  int(int32(w[6] >> 32)),
	}, nil
}

func removeMsgQueue(id int) error {
	if _, _, e := unix.Syscall(unix.SYS_MSGCTL, uintptr(id), uintptr(unix.IPC_RMID), 0); e != 0 {
		return msgErr(id, e)
	}
	return nil
}
