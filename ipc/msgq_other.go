//go:build !(linux && (amd64 || arm64 || riscv64 || loong64))

package ipc

import "context"

// MsgQueue is a System V message queue; on this platform OpenMsgQueue
// returns an error matching errors.ErrUnsupported.
type MsgQueue struct{}

// MsgMax returns an error matching errors.ErrUnsupported.
func MsgMax() (int, error) { return 0, errUnsupported }

// OpenMsgQueue returns an error matching errors.ErrUnsupported.
func OpenMsgQueue(ns *Namespace, name string, maxSize int) (*MsgQueue, error) {
	return nil, errUnsupported
}

// RemoveMsgQueue returns an error matching errors.ErrUnsupported.
func RemoveMsgQueue(ns *Namespace, name string) error { return errUnsupported }

func (q *MsgQueue) MaxSize() int { return 0 }
func (q *MsgQueue) ID() int      { return -1 }
func (q *MsgQueue) Send(ctx context.Context, typ int64, body []byte) error {
	return errUnsupported
}
func (q *MsgQueue) Receive(ctx context.Context, typ int64) (Message, error) {
	return Message{}, errUnsupported
}
func (q *MsgQueue) TryReceive(typ int64) (Message, error) { return Message{}, errUnsupported }
func (q *MsgQueue) Stat() (MsgStat, error)                { return MsgStat{}, errUnsupported }
func (q *MsgQueue) Close() error                          { return nil }
