package local_test

import (
	"testing"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/chantest"
	"github.com/batonlock/baton/local"
)

var chanSuite = chantest.Suite{
	Name:         "local",
	Open:         func(dir string) (baton.Backend, error) { return local.Open(dir) },
	Objects:      objects,
	CrossProcess: true,
	HoldsEnds:    true,
}

func init() { chantest.Helper(chanSuite) }

func TestChannelConformance(t *testing.T) { chantest.Run(t, chanSuite, t.TempDir()) }
