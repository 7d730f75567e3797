//go:build linux

package shmvalue

import (
	"context"
	"testing"
)

// go test -bench . ./shmvalue: an uncontended CompareAndSwap and Load of
// 256 bytes, through the driver.
func BenchmarkCompareAndSwap(b *testing.B) {
	v := openB(b)
	ctx := context.Background()
	data := make([]byte, 256)
	var ver uint64
	var err error
	for b.Loop() {
		if ver, err = v.CompareAndSwap(ctx, ver, data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoad(b *testing.B) {
	v := openB(b)
	ctx := context.Background()
	if _, err := v.CompareAndSwap(ctx, 0, make([]byte, 256)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := v.Load(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
