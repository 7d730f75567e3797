package recipecheck

import (
	"testing"

	"github.com/batonlock/baton/cluster/internal/redistest"
	"github.com/batonlock/baton/recipe/recipetest"
)

func TestRedis(t *testing.T) {
	s := redistest.Start(t)
	recipetest.Run(t, redisSuite, s.URL(""))
}

func BenchmarkFailoverRedis(b *testing.B) {
	s := redistest.Start(b)
	recipetest.BenchFailover(b, redisSuite, s.URL(""))
}
