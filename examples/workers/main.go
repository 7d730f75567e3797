// Command workers starts several worker processes on this machine that share
// one named baton Mutex and take turns holding it, each printing its fencing
// token while it holds. No server is needed: the same-host backend keeps the
// lock in a namespace directory. examples/cluster runs the same workers on
// Redis or etcd.
//
//	go run ./examples/workers -n 4 -rounds 5
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/batonlock/baton/examples/internal/demo"
	"github.com/batonlock/baton/local"
)

func main() {
	c, worker := demo.Flags(flag.CommandLine)
	dir := flag.String("dir", "", "namespace directory (default: per-user runtime directory)")
	flag.Parse()
	if err := c.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "workers:", err)
		os.Exit(64)
	}
	if *worker == 0 {
		if err := demo.Parent(c, "this machine", "-dir", *dir); err != nil {
			fmt.Fprintln(os.Stderr, "workers:", err)
			os.Exit(1)
		}
		return
	}
	b, err := local.Open(*dir) // the one line that changes for a cluster
	if err == nil {
		defer b.Close()
		err = demo.Work(b, *worker, c)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker %d: %v\n", *worker, err)
		os.Exit(1)
	}
}
