//go:build !(linux && (amd64 || arm64 || riscv64 || loong64))

package ipc

import "context"

// SemSet is a System V semaphore set; on this platform every call returns
// an error matching errors.ErrUnsupported.
type SemSet struct{}

// CreateSemSet returns an error matching errors.ErrUnsupported.
func CreateSemSet(nsems int) (*SemSet, int32, error) { return nil, 0, errUnsupported }

// OpenSemSetID returns an error matching errors.ErrUnsupported.
func OpenSemSetID(id int) (*SemSet, error) { return nil, errUnsupported }

// StatSemSet returns an error matching errors.ErrUnsupported.
func StatSemSet(id int) (SemStat, error) { return SemStat{}, errUnsupported }

func (s *SemSet) ID() int                                              { return -1 }
func (s *SemSet) NSems() int                                           { return 0 }
func (s *SemSet) TryOp(ops []SemOp) error                              { return errUnsupported }
func (s *SemSet) Op(ctx context.Context, ops []SemOp) error            { return errUnsupported }
func (s *SemSet) Do(ctx context.Context, ops []SemOp, wait bool) error { return errUnsupported }
func (s *SemSet) Value(num int) (int, error)                           { return 0, errUnsupported }
func (s *SemSet) Waiting(num int) (ncnt, zcnt int, err error)          { return 0, 0, errUnsupported }
func (s *SemSet) LastPID(num int) (int, error)                         { return 0, errUnsupported }
func (s *SemSet) Stat() (SemStat, error)                               { return SemStat{}, errUnsupported }
func (s *SemSet) Remove() error                                        { return errUnsupported }
