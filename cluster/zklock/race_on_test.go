//go:build race

package zklock

const raceBuild = true
