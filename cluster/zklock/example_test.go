package zklock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/batonlock/baton"
	_ "github.com/batonlock/baton/cluster/zklock" // registers zk://
)

// An ensemble by URL: the path is the prefix of the nodes, ttl the session
// timeout.
func Example() {
	ctx := context.Background()
	b, err := baton.Open(ctx, "zk://zk1:2181,zk2:2181,zk3:2181/myapp?ttl=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	m, err := b.Mutex(ctx, "leader")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	hold, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	select {
	case <-hold.Lost(): // the session expired: someone else may lead now
	default:
		fmt.Println("leading with token", hold.Token())
	}
}
