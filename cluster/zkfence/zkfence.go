// Package zkfence makes fenced writes to ZooKeeper: writes that carry a
// baton fencing token and that are refused when the token is lower than
// the highest one accepted before for the same fence node. A holder paused
// or partitioned past its session, whose lock another holder has taken and
// written under since, therefore cannot overwrite the newer holder's data,
// even if it never looks at Hold.Lost.
//
// The fence node holds the highest token in decimal. A write reads it with
// its version, refuses a lower token, and otherwise runs one multi: the
// token set on the fence node at the version read (created, when there is
// none yet), then the caller's operations. A writer that raced another and
// finds the version changed reads again and decides again, so every write
// that succeeds was checked against the token that was highest when it
// committed. A create refused because the parent is missing is returned. Give each resource one fence node, and each fence node one
// lock name; the node is persistent, and its parent must exist.
//
// Refusals are *fence.StaleError values: errors.Is(err, fence.ErrStale)
// and errors.Is(err, baton.ErrLost) hold. Equal tokens are accepted (one
// hold writing more than once), as by every guard of package fence.
//
// The package is apart from cluster/zklock, so that a resource in
// ZooKeeper can be fenced whatever backend the lock is on.
package zkfence

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-zookeeper/zk"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/fence"
)

// Fence is the highest token accepted for one resource, kept in a node of
// a ZooKeeper ensemble. It is safe for concurrent use.
type Fence struct {
	c    *zk.Conn
	path string
	acl  []zk.ACL
}

// New returns the fence kept at path on c; acl is the fence node's ACL
// when a write creates it (nil: zk.WorldACL(zk.PermAll)). It makes no
// request.
func New(c *zk.Conn, path string, acl []zk.ACL) (*Fence, error) {
	if c == nil || len(path) < 2 || path[0] != '/' || path[len(path)-1] == '/' {
		return nil, fmt.Errorf("%w: zkfence: nil connection or a path that is not absolute", baton.ErrInvalidArgument)
	}
	if acl == nil {
		acl = zk.WorldACL(zk.PermAll)
	}
	return &Fence{c: c, path: path, acl: acl}, nil
}

// Path returns the fence node's path.
func (f *Fence) Path() string { return f.path }

// Do runs ops (*zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest,
// *zk.CheckVersionRequest) in one multi with the fence's check, if token
// is at least the highest token of the fence, and records the token; it
// returns the operations' responses, in order. A stale token gets a
// *fence.StaleError and runs nothing; an operation that ZooKeeper refuses
// (a node missing, a version check) returns ZooKeeper's error and leaves
// the fence as it was. The operations must not touch the fence node.
//
// go-zookeeper takes no context: ctx is checked before each round trip,
// and one in flight runs to its end.
func (f *Fence) Do(ctx context.Context, token baton.Token, ops ...any) ([]zk.MultiResponse, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: zkfence: nil context", baton.ErrInvalidArgument)
	}
	if token == 0 {
		return nil, fmt.Errorf("%w: zkfence: token 0 is no fencing token", baton.ErrInvalidArgument)
	}
	for _, op := range ops {
		switch op.(type) {
		case *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest, *zk.CheckVersionRequest:
		default:
			return nil, fmt.Errorf("%w: zkfence: %T is no multi operation", baton.ErrInvalidArgument, op)
		}
	}
	data := []byte(strconv.FormatUint(uint64(token), 10))
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		highest, st, err := f.read()
		if err != nil {
			return nil, err
		}
		if token < highest {
			return nil, &fence.StaleError{Token: token, Highest: highest}
		}
		all := make([]any, 0, 1+len(ops))
		if st == nil {
			all = append(all, &zk.CreateRequest{Path: f.path, Data: data, Acl: f.acl})
		} else {
			all = append(all, &zk.SetDataRequest{Path: f.path, Data: data, Version: st.Version})
		}
		all = append(all, ops...)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res, err := f.c.Multi(all...)
		if err == nil {
			return res[1:], nil
		}
		// When the fence node changed since it was read (another writer's
		// multi), the fence's own operation may be what failed: decide
		// again on what the node holds now. Otherwise the caller's
		// operations failed, or the connection did.
		if !errors.Is(err, zk.ErrBadVersion) && !errors.Is(err, zk.ErrNodeExists) && !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
		_, now, rerr := f.read()
		if rerr != nil {
			return nil, rerr
		}
		if changed(st, now) {
			continue
		}
		return nil, err
	}
}

func changed(a, b *zk.Stat) bool {
	if a == nil || b == nil {
		return a != b
	}
	return a.Version != b.Version || a.Czxid != b.Czxid
}

// read returns the fence's highest token and the node's stat (nil when
// there is no node).
func (f *Fence) read() (baton.Token, *zk.Stat, error) {
	b, st, err := f.c.Get(f.path)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	t, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("zkfence: fence node %s holds %q, no token", f.path, b)
	}
	return baton.Token(t), st, nil
}

// Set is a fenced set of the data of the node at path (which must exist),
// at any version.
func (f *Fence) Set(ctx context.Context, token baton.Token, path string, data []byte) error {
	_, err := f.Do(ctx, token, &zk.SetDataRequest{Path: path, Data: data, Version: -1})
	return err
}

// Highest returns the highest token the fence has accepted (0 before the
// first).
func (f *Fence) Highest(ctx context.Context) (baton.Token, error) {
	if ctx == nil {
		return 0, fmt.Errorf("%w: zkfence: nil context", baton.ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	t, _, err := f.read()
	return t, err
}
