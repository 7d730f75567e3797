// Command onlylocal is a same-host program that opens its backend by URL;
// the package's tests check what it links.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/batonlock/baton"
	_ "github.com/batonlock/baton/local"
)

func main() {
	b, err := baton.Open(context.Background(), "local:")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = b.Close()
}
