package etcdlock

import "github.com/batonlock/baton/cluster/lease"

// The schemes of OpenURL are opened by baton.Open in every program that
// imports the package.
func init() {
	lease.Register(OpenURL, "etcd", "etcds")
}
