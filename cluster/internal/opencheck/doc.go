// Package opencheck holds the tests of what baton.Open does with the URLs
// of every network scheme before it connects; it has no code of its own.
package opencheck
