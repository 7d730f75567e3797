package ipc

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Kinds of System V records in a namespace: one directory each.
const (
	KindSysvSem = "sysv-sem" // counting semaphores (package semaphore)
	KindSysvRW  = "sysv-rw"  // read-write locks (package rwlock)
	KindMsgQ    = "mq"       // message queues
)

// SysvKinds lists every kind whose records name System V objects.
var SysvKinds = []string{KindSysvSem, KindSysvRW, KindMsgQ}

// Record is what the namespace keeps for a name that stands for a System V
// object: the kernel id and key, the full name (compared on every open, so
// that a file never answers for another name), and the parameter the object
// was created with (a capacity, a message size).
//
// A record file is an 8-byte counter (native byte order, used for fencing
// tokens) followed by the record as JSON. The counter survives the
// re-creation of the object. A record with ID -1 was written before its
// object was created (its creator was killed, or is creating it under the
// record's flock): the object, if any, is the one with the record's key.
type Record struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	ID    int    `json:"id"`
	Key   int32  `json:"key"`
	NSems int    `json:"nsems,omitempty"`
	Param int64  `json:"param"`
	// Alive is set by listings: the object exists and matches the record.
	Alive bool `json:"-"`
	// Counter is set by listings: the counter of the record file.
	Counter uint64 `json:"-"`
}

const recordHeader = 8

// readRecord reads the record of f; ok is false for an empty or
// unreadable file (a record being created, or one whose creator died before
// writing it).
func readRecord(f *os.File) (rec Record, counter uint64, ok bool, err error) {
	st, err := f.Stat()
	if err != nil {
		return Record{}, 0, false, err
	}
	if st.Size() <= recordHeader {
		return Record{}, 0, false, nil
	}
	buf := make([]byte, st.Size())
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return Record{}, 0, false, err
	}
	counter = binary.NativeEndian.Uint64(buf[:recordHeader])
	if err := json.Unmarshal(buf[recordHeader:], &rec); err != nil {
		return Record{}, counter, false, nil
	}
	return rec, counter, true, nil
}

// writeRecord replaces the record of f, with counter in front.
func writeRecord(f *os.File, rec Record, counter uint64) error {
	js, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	buf := make([]byte, recordHeader, recordHeader+len(js)+1)
	binary.NativeEndian.PutUint64(buf, counter)
	buf = append(buf, js...)
	buf = append(buf, '\n')
	if _, err := f.WriteAt(buf, 0); err != nil {
		return fmt.Errorf("ipc: record %s: %w", f.Name(), err)
	}
	if err := f.Truncate(int64(len(buf))); err != nil {
		return fmt.Errorf("ipc: record %s: %w", f.Name(), err)
	}
	return nil
}
