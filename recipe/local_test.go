package recipe_test

import (
	"testing"
	"time"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/local"
	"github.com/batonlock/baton/recipe/recipetest"
)

var localSuite = recipetest.Suite{
	Name:      "local",
	Open:      func(dir string) (baton.Backend, error) { return local.Open(dir) },
	Failover:  time.Second,
	LossBound: 5 * time.Second,
	RateStore: local.OpenRateStore,
}

func TestMain(m *testing.M) { recipetest.Main(m, localSuite) }

func TestLocal(t *testing.T) { recipetest.Run(t, localSuite, t.TempDir()) }

func BenchmarkFailoverLocal(b *testing.B) { recipetest.BenchFailover(b, localSuite, b.TempDir()) }
