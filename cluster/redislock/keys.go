package redislock

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
)

// escapeName maps a name injectively onto a string without '{' or '}', so
// that it can sit inside a hash tag: '%' -> "%25", '{' -> "%7B", '}' -> "%7D".
func escapeName(name string) string {
	if !strings.ContainsAny(name, "%{}") {
		return name
	}
	r := strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")
	return r.Replace(name)
}

func unescapeName(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	r := strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")
	return r.Replace(s)
}

// Key kinds: the part of a key between the prefix and the hash tag.
const (
	kmutex = "mutex"
	krw    = "rwmutex"
	ksem   = "sem"
	kcond  = "cond"
	kredl  = "redlock"
)

// keyBase returns prefix + kind + ":{" + escaped name + "}:".
func keyBase(prefix, kind, name string) string {
	return prefix + kind + ":{" + escapeName(name) + "}:"
}

// Key suffixes of each kind, in the order of its scripts' KEYS.
var (
	mutexSuffixes = []string{"owner", "counter", "queue", "qexp", "qdata", "seq"}            // mutex_common.lua
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
	return nameKeys(keyBase(prefix, kmutex, name), mutexSuffixes, more...)
}

func lockKeys(prefix, kind, name string, more ...string) []string {
	return nameKeys(keyBase(prefix, kind, name), lockSuffixes, more...)
}

func semKeys(prefix, name string, more ...string) []string {
	return nameKeys(keyBase(prefix, ksem, name), semSuffixes, more...)
}

func condKeys(prefix, name string) []string {
	return nameKeys(keyBase(prefix, kcond, name), condSuffixes)
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// holdID returns an id unique to one acquisition: the backend's random
// prefix and a sequence number. It costs no system call, unlike newID.
func (d *backend) holdID() string {
	return d.idPrefix + strconv.FormatUint(d.idSeq.Add(1), 36)
}
