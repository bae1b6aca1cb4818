// Package benchutil holds helpers shared by kvselect's benchmarks.
package benchutil
