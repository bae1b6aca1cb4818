// Package fakenode is a stand-in kvselect node for the tests of HTTP
// callers (the Go client, kvselectctl): each route answers what the test
// scripts, and every request is recorded. It lives in a non-test file so
// that every caller's tests share one, as hashicorp/raft ships its test
// cluster.
package fakenode
