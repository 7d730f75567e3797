package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version describes the build from its build information: the module
// version (or "(devel)" in a clone), the VCS revision and time when the
// binary was built from a checkout, and the Go version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information) " + runtime.Version()
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	parts := []string{v}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		parts = append(parts, "rev "+rev+dirty)
	}
	if when != "" {
		parts = append(parts, when)
	}
	return strings.Join(parts, ", ") + " " + bi.GoVersion
}
