package baton

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest name, in bytes, that any backend accepts.
const MaxNameLen = 200

// ValidateName checks the rules that names follow on every backend: 1 to
// MaxNameLen bytes of valid UTF-8, no control characters (NUL included), and
// '/'-separated segments that are neither empty, "." nor ".." (so "a/b" is a
// name, and "/", "a//b" and "../x" are not). The error matches
// ErrInvalidName.
//
// Backends map valid names injectively onto their own objects (files under a
// namespace directory, keys under one prefix).
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidName, len(name), MaxNameLen)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidName, name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("%w: %q has a control character", ErrInvalidName, name)
		}
	}
	for seg := range strings.SplitSeq(name, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %q has an empty segment (leading, trailing or double '/')", ErrInvalidName, name)
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrInvalidName, name, seg)
		}
	}
	return nil
}

// ValidatePermits checks a semaphore capacity or request: 0 < n, and n <=
// capacity when capacity > 0. The error matches ErrInvalidArgument.
func ValidatePermits(n, capacity int64) error {
	if n <= 0 {
		return fmt.Errorf("%w: permits %d, must be > 0", ErrInvalidArgument, n)
	}
	if capacity > 0 && n > capacity {
		return fmt.Errorf("%w: %d permits asked of a semaphore of %d", ErrInvalidArgument, n, capacity)
	}
	return nil
}
