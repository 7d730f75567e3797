package main

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// parseDuration reads a duration as flock(1) does (seconds, fractions
// allowed: "1.5") or as Go does ("500ms", "2m30s"). Negative durations are
// refused.
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f*float64(time.Second) > math.MaxInt64 {
			return 0, fmt.Errorf("duration %q out of range", s)
		}
		d = time.Duration(f * float64(time.Second))
	} else {
		d, err = time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("duration %q: want seconds (1.5) or a Go duration (500ms, 2m)", s)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return d, nil
}

// durationFlag is a pflag.Value for parseDuration.
type durationFlag struct {
	d   time.Duration
	set bool
}

func (f *durationFlag) String() string {
	if !f.set {
		return ""
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	f.d, f.set = d, true
	return nil
}

func (f *durationFlag) Type() string { return "duration" }
