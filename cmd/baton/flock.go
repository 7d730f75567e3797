package main

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// flockFlags are the flags of the flock(1) forms of run and lock
// (flock_unix.go).
type flockFlags struct {
	file   string
	fd     int
	unlock bool
}

const flockHelp = `
A NAME that is an absolute path (or --file PATH) is a file, locked with
flock(2) as flock(1) locks it (created if missing): baton then excludes,
and is excluded by, flock(1) and every other flock user of that file; -s,
-x, -n, -w and -E work as for names. The backend is not used, the lock
has no fencing token, and it goes with baton.
`

// addFileFlags adds --file, and with fd the --fd and -u of lock.
func addFileFlags(cmd *cobra.Command, f *runFlags, fd bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.flock.file, "file", "", "lock the file `PATH` with flock(2), as flock(1) does (also: NAME an absolute path)")
	cmd.Long += flockHelp
	if fd {
		fl.IntVar(&f.flock.fd, "fd", 0, "flock(2) the open descriptor `N` of the shell and exit, as flock(1) N: the lock stays with the descriptor")
		fl.BoolVarP(&f.flock.unlock, "unlock", "u", false, "with --fd: unlock the descriptor (flock -u)")
	}
}

// fileArgs puts the file of --file in the place of NAME, as an absolute
// path.
func fileArgs(f *runFlags, args []string) ([]string, error) {
	if f.flock.file == "" {
		return args, nil
	}
	p, err := filepath.Abs(f.flock.file)
	if err != nil {
		return nil, usageErrorf("--file %s: %v", f.flock.file, err)
	}
	return append([]string{p}, args...), nil
}

// isFilePath reports whether NAME names a file: an absolute path, which no
// baton name is (names have no empty segment).
func isFilePath(name string) bool { return strings.HasPrefix(name, "/") }

// lockFDForm runs the --fd form of lock, if asked for: done reports so.
func lockFDForm(cmd *cobra.Command, f *runFlags, args []string) (done bool, err error) {
	if !cmd.Flags().Changed("fd") {
		if f.flock.unlock {
			return true, usageErrorf("-u unlocks a descriptor: give --fd N")
		}
		return false, nil
	}
	switch {
	case len(args) > 0:
		return true, usageErrorf("--fd N takes no NAME (unexpected %q)", args[0])
	case f.flock.fd < 0:
		return true, usageErrorf("--fd %d: want a descriptor number", f.flock.fd)
	case f.flock.file != "":
		return true, usageErrorf("--fd and --file exclude each other")
	case f.shared && (f.exclusive || f.exclusiveE):
		return true, usageErrorf("-s and -x exclude each other")
	case f.conflict < 0 || f.conflict > 255:
		return true, usageErrorf("-E %d: the conflict exit code must be 0 to 255", f.conflict)
	}
	return true, lockFD(f, f.flock.fd)
}
