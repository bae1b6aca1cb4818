module github.com/kvselect/kvselect/jepsen

go 1.26.0

replace github.com/kvselect/kvselect => ../

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/kvselect/kvselect v0.0.0-00010101000000-000000000000
)
