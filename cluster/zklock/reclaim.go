package zklock

import (
	"errors"

	"github.com/go-zookeeper/zk"
)

// remove deletes node n and, in the same transaction, its queue and the
// name's directory when n was the queue's last node, so that an idle name
// leaves no znode. While other nodes are queued the transaction is refused
// as a whole (ErrNotEmpty) and n alone is deleted. Tokens are creation
// zxids, which never go back, so a name made again draws above every token
// it gave before; a creation that races the deletion makes the queue again
// (create).
func (b *backend) remove(n *node) error {
	dir := n.q[:len(n.q)-len("/q")]
	_, err := b.c.Multi(&zk.DeleteRequest{Path: n.path, Version: -1},
		&zk.DeleteRequest{Path: n.q, Version: -1}, &zk.DeleteRequest{Path: dir, Version: -1})
	if errors.Is(err, zk.ErrNotEmpty) {
		return b.c.Delete(n.path, -1)
	}
	return err
}

// tidy deletes the queue and directory of a name if the queue is empty,
// as remove does, for the nodes that others delete (a Cond's waiters).
func (b *backend) tidy(dir string) {
	_, _ = b.c.Multi(&zk.DeleteRequest{Path: dir + "/q", Version: -1}, &zk.DeleteRequest{Path: dir, Version: -1})
}
