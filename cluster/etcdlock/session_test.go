package etcdlock

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/batonlock/baton"
)

// killSession revokes the lease of the key that holds the suite's Mutex
// name, as another client or an operator can: the server deletes every
// key of the holder's session with it, and the hold is lost.
func killSession(cfg, name string) (bool, error) {
	t, err := parseURL(cfg)
	if err != nil {
		return false, err
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: t.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return false, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := &backend{o: options{prefix: t.prefix}}
	resp, err := c.Get(ctx, b.dir(baton.KindMutex, name)+"q/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return false, err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].Lease == 0 {
		return false, fmt.Errorf("no key with a lease holds %q", name)
	}
	_, err = c.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	return false, err
}
