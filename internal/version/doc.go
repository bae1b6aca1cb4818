// Package version says what build a binary is: kvselect's version, the
// commit it was built from (from the Go toolchain's VCS stamp) and the Go
// version. Every binary prints it for --version, and the server exports
// it as the kvselect_build_info metric.
package version
