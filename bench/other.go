//go:build !linux

// Command bench measures baton's backends against their peers; it runs on
// Linux only.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bench: Linux only")
	os.Exit(1)
}
