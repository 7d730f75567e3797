//go:build !race

package zklock

const raceBuild = false
