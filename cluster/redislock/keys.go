package redislock

import (
	"strconv"
	"strings"

	"github.com/batonlock/baton/cluster/internal/redisnode"
)

// Key kinds: the part of a key between the prefix and the hash tag.
const (
	kmutex = "mutex"
	krw    = "rwmutex"
	ksem   = "sem"
	kcond  = "cond"
)

// Key suffixes of each kind, in the order of its scripts' KEYS.
var (
	mutexSuffixes = []string{"owner", "counter", "line", "lexp", "lwait"}                    // mutex_common.lua
	lockSuffixes  = []string{"holders", "info", "queue", "qexp", "qdata", "counter", "seq"}  // lock_common.lua
	semSuffixes   = []string{"holders", "info", "queue", "qexp", "qdata", "capacity", "seq"} // sem_common.lua
	condSuffixes  = []string{"queue", "qexp", "qdata", "seq"}                                // cond_common.lua
)

// nameKeys returns base + each suffix, followed by the keys of more, as
// substrings of one string: the keys a handle keeps cost two allocations,
// not one per key.
func nameKeys(base string, suffixes []string, more ...string) []string {
	n := 0
	for _, s := range suffixes {
		n += len(base) + len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range suffixes {
		b.WriteString(base)
		b.WriteString(s)
	}
	all := b.String()
	keys := make([]string, 0, len(suffixes)+len(more))
	for _, s := range suffixes {
		l := len(base) + len(s)
		keys = append(keys, all[:l])
		all = all[l:]
	}
	return append(keys, more...)
}

func mutexKeys(prefix, name string, more ...string) []string {
	return nameKeys(redisnode.KeyBase(prefix, kmutex, name), mutexSuffixes, more...)
}

func lockKeys(prefix, kind, name string, more ...string) []string {
	return nameKeys(redisnode.KeyBase(prefix, kind, name), lockSuffixes, more...)
}

func semKeys(prefix, name string, more ...string) []string {
	return nameKeys(redisnode.KeyBase(prefix, ksem, name), semSuffixes, more...)
}

func condKeys(prefix, name string) []string {
	return nameKeys(redisnode.KeyBase(prefix, kcond, name), condSuffixes)
}

// keySet makes the KEYS of a name's scripts when a call needs them: a
// handle keeps only the name's key base, since users keep thousands of
// idle handles, and a call to the server costs far more than the two
// allocations.
type keySet struct {
	base     string   // redisnode.KeyBase of the name
	suffixes []string // the kind's (mutexSuffixes, …)
	marker   string   // the marker key (restart.go), last of all; "" for none
}

func newKeySet(prefix, kind, name string, suffixes []string, marker string) keySet {
	return keySet{base: redisnode.KeyBase(prefix, kind, name), suffixes: suffixes, marker: marker}
}

// all returns the keys in the order of the kind's scripts' KEYS.
func (k keySet) all() []string {
	if k.marker == "" {
		return nameKeys(k.base, k.suffixes)
	}
	return nameKeys(k.base, k.suffixes, k.marker)
}

// holdID returns an id unique to one acquisition: the backend's random
// prefix and a sequence number. It costs no system call, unlike redisnode.NewID.
func (d *backend) holdID() string {
	return d.idPrefix + strconv.FormatUint(d.idSeq.Add(1), 36)
}
