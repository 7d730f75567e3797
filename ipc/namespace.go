package ipc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton"
)

// maxEncodedName is the longest encoded name; it keeps every file name of a
// namespace under the 255-byte limit of Linux file systems, with room for a
// suffix.
const maxEncodedName = 240

// Namespace is a directory that holds one small file per named object. Two
// processes that open the same directory share the objects. The zero value
// is not usable; use OpenNamespace.
type Namespace struct {
	dir    string
	linger atomic.Int64 // a time.Duration: see SetLinger
}

// DefaultDir returns the per-user default namespace directory:
// $XDG_RUNTIME_DIR/baton when XDG_RUNTIME_DIR is set, else
// /dev/shm/baton-UID.
func DefaultDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "baton")
	}
	return filepath.Join("/dev/shm", "baton-"+strconv.Itoa(os.Getuid()))
}

// OpenNamespace opens (creating it with mode 0700 when missing) the
// namespace directory dir; "" means DefaultDir(). The directory must be
// absolute once cleaned.
func OpenNamespace(dir string) (*Namespace, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	if strings.IndexByte(dir, 0) >= 0 {
		return nil, fmt.Errorf("%w: namespace directory has a NUL byte", baton.ErrInvalidArgument)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: namespace directory %q: %w", baton.ErrInvalidArgument, dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("ipc: namespace %s: %w", abs, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("ipc: namespace %s: %w", abs, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: namespace %s is not a directory", baton.ErrInvalidArgument, abs)
	}
	return &Namespace{dir: abs}, nil
}

// DefaultLinger is the linger (SetLinger) that the local backend gives its
// namespace unless told otherwise.
const DefaultLinger = 100 * time.Millisecond

// SetLinger sets how long a file of OpenShared that this process opened
// through ns lingers after the release of its last handle in the process,
// kept open and mapped so that a handle opened on the name meanwhile costs
// no system call, before it is reclaimed off the caller's path. With 0,
// the default, it is reclaimed at that release. A process that exits
// while files linger leaves them (as it leaves the files of handles it
// did not close): ReclaimIdle ends the lingers at once. A duration outside
// [0, 1m] is refused and changes nothing.
func (ns *Namespace) SetLinger(d time.Duration) error {
	if err := CheckLinger(d); err != nil {
		return err
	}
	ns.linger.Store(int64(d))
	return nil
}

// CheckLinger refuses a linger SetLinger would refuse, with an error
// matching baton.ErrInvalidArgument.
func CheckLinger(d time.Duration) error {
	if d < 0 || d > time.Minute {
		return fmt.Errorf("%w: linger %v, must be in [0, 1m]", baton.ErrInvalidArgument, d)
	}
	return nil
}

func (ns *Namespace) lingerFor() time.Duration { return time.Duration(ns.linger.Load()) }

// Dir returns the absolute path of the namespace directory.
func (ns *Namespace) Dir() string { return ns.dir }

// Path returns the file that stands for name among objects of kind (a short
// lower-case word such as "flock" or "sem"): DIR/KIND/ENCODED. It validates
// the name and has no side effect.
func (ns *Namespace) Path(kind, name string) (string, error) {
	e, err := ns.Entry(kind, name)
	return e.path, err
}

// Entry is a name resolved to its file in a namespace, DIR/KIND/ENCODED, so
// that the packages that open the object behind it need not validate or
// encode the name again. The zero Entry resolves nothing; openers refuse
// it.
type Entry struct {
	ns   *Namespace
	kind string
	name string
	path string
}

// Entry validates name and resolves it among objects of kind; it has no
// side effect. A nil ns gives an error matching baton.ErrInvalidArgument.
func (ns *Namespace) Entry(kind, name string) (Entry, error) {
	if ns == nil {
		return Entry{}, fmt.Errorf("%w: nil namespace", baton.ErrInvalidArgument)
	}
	if err := baton.ValidateName(name); err != nil {
		return Entry{}, err
	}
	if err := CheckEncodedLen(name); err != nil {
		return Entry{}, err
	}
	return ns.Resolve(kind, name), nil
}

// Resolve is Entry for a name already checked with baton.ValidateName and
// CheckEncodedLen (as the local backend's core does before it opens
// anything): it only encodes. Whatever the name, the path stays inside
// DIR/KIND, since the encoding escapes '/' and a leading '.'; the empty
// name resolves to no path.
func (ns *Namespace) Resolve(kind, name string) Entry {
	if name == "" {
		return Entry{ns: ns, kind: kind} // no path: openers refuse it
	}
	return Entry{ns: ns, kind: kind, name: name, path: filepath.Join(ns.dir, kind, encode(name))}
}

// Open is the Open of a package whose OpenEntry opens a resolved entry: it
// validates name and resolves it among objects of kind, then calls open.
func Open[T any](ns *Namespace, kind, name string, open func(Entry) (T, error)) (T, error) {
	e, err := ns.Entry(kind, name)
	if err != nil {
		var zero T
		return zero, err
	}
	return open(e)
}

// Check returns an error matching baton.ErrInvalidArgument unless e was
// resolved (Entry, Resolve) among objects of kind.
func (e Entry) Check(kind string) error { return e.valid(kind) }

// Namespace returns the namespace of the entry.
func (e Entry) Namespace() *Namespace { return e.ns }

// Kind returns the kind of object the entry stands for.
func (e Entry) Kind() string { return e.kind }

// Name returns the name, as given.
func (e Entry) Name() string { return e.name }

// Path returns the file of the entry.
func (e Entry) Path() string { return e.path }

// valid reports whether e came from Entry or Resolve, for kind.
func (e Entry) valid(kind string) error {
	if e.ns == nil || e.path == "" {
		return fmt.Errorf("%w: unresolved namespace entry", baton.ErrInvalidArgument)
	}
	if e.kind != kind {
		return fmt.Errorf("%w: entry of kind %q where %q is wanted", baton.ErrInvalidArgument, e.kind, kind)
	}
	return nil
}

// EnsureKind creates the directory of kind when missing.
func (ns *Namespace) EnsureKind(kind string) error {
	if err := os.Mkdir(filepath.Join(ns.dir, kind), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("ipc: namespace %s: %w", ns.dir, err)
	}
	return nil
}

// Names lists the names of kind that have a file in the namespace, in
// directory order; files whose names do not decode are skipped.
func (ns *Namespace) Names(kind string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(ns.dir, kind))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ipc: namespace %s: %w", ns.dir, err)
	}
	var names []string
	for _, e := range ents {
		if n, err := DecodeName(e.Name()); err == nil {
			names = append(names, n)
		}
	}
	return names, nil
}

// EncodeName maps a valid baton name onto one file name, injectively: ASCII
// letters, digits, '-' and '_' stand for themselves, '.' too except in the
// first place, and every other byte is written %XX. It returns an error
// matching baton.ErrInvalidName for an invalid name or one whose encoding
// would be longer than 240 bytes.
func EncodeName(name string) (string, error) {
	if err := baton.ValidateName(name); err != nil {
		return "", err
	}
	if err := CheckEncodedLen(name); err != nil {
		return "", err
	}
	return encode(name), nil
}

// plain reports whether byte i of a name stands for itself once encoded.
func plain(c byte, i int) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && i > 0
}

// CheckEncodedLen returns an error matching baton.ErrInvalidName when the
// encoding of name would be longer than 240 bytes, the rule a namespace
// adds to baton.ValidateName. It counts without encoding.
func CheckEncodedLen(name string) error {
	n := 0
	for i := 0; i < len(name); i++ {
		if plain(name[i], i) {
			n++
		} else {
			n += 3
		}
	}
	if n > maxEncodedName {
		return fmt.Errorf("%w: %d bytes once encoded as a file name, more than %d", baton.ErrInvalidName, n, maxEncodedName)
	}
	return nil
}

// encode writes name as EncodeName does, without checking it.
func encode(name string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		if plain(c, i) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// DecodeName inverts EncodeName.
func DecodeName(enc string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(enc) {
			return "", fmt.Errorf("%w: bad escape in %q", baton.ErrInvalidName, enc)
		}
		v, err := strconv.ParseUint(enc[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("%w: bad escape in %q", baton.ErrInvalidName, enc)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	name := b.String()
	if again, err := EncodeName(name); err != nil || again != enc {
		return "", fmt.Errorf("%w: %q is not an encoded name", baton.ErrInvalidName, enc)
	}
	return name, nil
}

// Check validates name for ns (a nil ns is an error matching
// baton.ErrInvalidArgument); it has no side effect.
func (ns *Namespace) Check(name string) error {
	if ns == nil {
		return fmt.Errorf("%w: nil namespace", baton.ErrInvalidArgument)
	}
	_, err := EncodeName(name)
	return err
}

// ListKind describes every object of kind in ns with inspect, skipping the
// names whose object vanishes while listing (inspect returns an error
// matching fs.ErrNotExist).
func ListKind(ns *Namespace, kind string, inspect func(*Namespace, string) (baton.Info, error)) ([]baton.Info, error) {
	if ns == nil {
		return nil, fmt.Errorf("%w: nil namespace", baton.ErrInvalidArgument)
	}
	names, err := ns.Names(kind)
	if err != nil {
		return nil, err
	}
	return collect(make([]baton.Info, 0, len(names)), names, func(n string) (baton.Info, error) { return inspect(ns, n) })
}

// RemoveKind removes the region of name, as the Remove of each
// region-backed primitive does, and names the primitive (what) in the
// error: one matching fs.ErrNotExist when there is no such object.
func RemoveKind(ns *Namespace, kind, name, what string) error {
	if err := RemoveRegion(ns, kind, name); err != nil {
		return fmt.Errorf("%s %q: %w", what, name, err)
	}
	return nil
}

// collect appends get(name) to out for each of names, skipping the names
// whose object vanished (get returns an error matching fs.ErrNotExist). On
// another error it returns what it has with the error.
func collect[T any](out []T, names []string, get func(name string) (T, error)) ([]T, error) {
	for _, n := range names {
		v, err := get(n)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}
