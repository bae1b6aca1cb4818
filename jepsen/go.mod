module github.com/kvselect/kvselect/jepsen

go 1.26.0

replace github.com/kvselect/kvselect => ../

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/kvselect/kvselect v0.0.0-00010101000000-000000000000
)

require (
	github.com/go-zeromq/goczmq/v4 v4.2.2 // indirect
	github.com/go-zeromq/zmq4 v0.17.0 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)
