// Package recipecheck runs the recipe suite (package recipe/recipetest)
// on the network backends against real servers on loopback: redis-server,
// an embedded etcd in a process of its own, PostgreSQL (initdb and
// postgres), MariaDB or MySQL, and a standalone ZooKeeper. It has no code
// but its tests.
package recipecheck
