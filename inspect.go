package baton

import (
	"context"
	"time"
)

// Kind names a primitive in listings.
type Kind string

const (
	KindMutex     Kind = "mutex"
	KindRWMutex   Kind = "rwmutex"
	KindSemaphore Kind = "semaphore"
	KindCond      Kind = "cond"
	KindValue     Kind = "value"
)

// Holder describes one current holder of a named object, as far as the
// backend knows it. Zero fields are unknown.
//
// Owner names the holder below its process, where the backend records
// it: the Owner (WithOwner) of a futex Mutex hold taken without waiting,
// in decimal; on ZooKeeper the id of the holding Backend (a random id that
// begins every node id of the Backend); on MySQL the owner id of the
// hold's row (the Backend's id and a count); on PostgreSQL the holder's
// session ("session" and its server process id).
type Holder struct {
	PID   int           `json:"pid,omitempty"`
	Host  string        `json:"host,omitempty"`
	Owner string        `json:"owner,omitempty"` // see above
	Since time.Time     `json:"since,omitzero"`  // when the hold began
	Token Token         `json:"token,omitempty"`
	Mode  string        `json:"mode,omitempty"` // "exclusive" or "shared"; a one-to-one channel's "sending end" or "receiving end"
	N     int64         `json:"n,omitempty"`    // permits, for semaphores
	TTL   time.Duration `json:"ttl,omitempty"`  // lease time left, for lease backends
}

// Info describes one named object of a backend.
type Info struct {
	Name      string   `json:"name"`
	Kind      Kind     `json:"kind"`
	Backend   string   `json:"backend"`            // driver.Backend.Kind
	Impl      string   `json:"impl,omitempty"`     // mechanism, e.g. "flock", "futex", "sysv"
	Holders   []Holder `json:"holders"`            // empty when free
	Waiters   int      `json:"waiters"`            // -1 when unknown
	Capacity  int64    `json:"capacity,omitempty"` // semaphores
	LastToken Token    `json:"last_token,omitempty"`
	Detail    string   `json:"detail,omitempty"` // backend-specific, e.g. a System V id
}

// Inspector is implemented by backends (and backend drivers) that can report
// on their named objects. The baton command's status, ls and rm use it.
type Inspector interface {
	// List returns every object the backend knows of.
	List(ctx context.Context) ([]Info, error)
	// Inspect returns the object of kind named name; an error matching
	// fs.ErrNotExist when there is none.
	Inspect(ctx context.Context, kind Kind, name string) (Info, error)
	// Remove deletes the object of kind named name. Holders that still use
	// it see their holds lost where the backend can tell them.
	Remove(ctx context.Context, kind Kind, name string) error
}
