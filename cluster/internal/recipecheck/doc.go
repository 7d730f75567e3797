// Package recipecheck runs the recipe suite (package recipe/recipetest)
// on the network backends against real servers: redis-server started on
// loopback and an embedded etcd in a process of its own. It has no code
// but its tests.
package recipecheck
