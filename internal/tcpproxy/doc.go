// Package tcpproxy is a TCP forwarder for tests: it stands between two
// nodes on loopback so a test can cut the link (every connection closed,
// new ones refused) and heal it again, and counts the connections it
// accepted. Every goroutine it starts ends at Close, which the test's
// cleanup calls.
package tcpproxy
