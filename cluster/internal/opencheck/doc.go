// Package opencheck holds the tests of what baton.Open does with the URLs
// of every network scheme before it connects, and of what opening a handle
// sends the server (nothing); it has no code of its own.
package opencheck
