//go:build !(linux && (amd64 || arm64 || riscv64 || loong64))

package ipc

// Object is a System V object of a namespace; on this platform none can be
// opened.
type Object struct {
	Record
}

func (o *Object) Sem() *SemSet                 { return &SemSet{} }
func (o *Object) NextCounter() (uint64, error) { return 0, errUnsupported }
func (o *Object) Counter() (uint64, error)     { return 0, errUnsupported }
func (o *Object) Close() error                 { return nil }

// OpenSemObject returns an error matching errors.ErrUnsupported.
func OpenSemObject(e Entry, nsems int, param int64, init func(*SemSet) error) (*Object, error) {
	return nil, errUnsupported
}

// Lookup returns an error matching errors.ErrUnsupported.
func Lookup(ns *Namespace, kind, name string) (Record, error) { return Record{}, errUnsupported }

// Remove returns an error matching errors.ErrUnsupported.
func Remove(ns *Namespace, kind, name string) error { return errUnsupported }

// List returns no records: there are no System V objects here.
func List(ns *Namespace) ([]Record, error) { return nil, nil }

// RemoveAll has nothing to remove.
func RemoveAll(ns *Namespace) error { return nil }
