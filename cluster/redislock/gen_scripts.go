//go:build ignore

// gen_scripts writes the scripts of scripts/src, assembled, to scripts/
// (go generate; see package internal/luagen).
package main

import (
	"log"
	"os"
	"path/filepath"

	"github.com/batonlock/baton/cluster/redislock/internal/luagen"
)

func main() {
	out, err := luagen.Generate(os.DirFS("scripts/src"))
	if err != nil {
		log.Fatal(err)
	}
	for name, b := range out {
		if err := os.WriteFile(filepath.Join("scripts", name), b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
