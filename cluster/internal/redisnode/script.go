package redisnode

import (
	"io/fs"

	"github.com/redis/go-redis/v9"
)

// Script loads the Lua script scripts/NAME.lua of fsys (a package's
// embedded scripts). A missing script is a build defect: it panics.
func Script(fsys fs.FS, name string) *redis.Script {
	src, err := fs.ReadFile(fsys, "scripts/"+name+".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(src))
}
