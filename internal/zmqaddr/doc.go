// Package zmqaddr parses the ZMQ endpoint forms kvselect accepts
// (tcp://host:port, ipc://path, inproc://name), once, for the FSM's
// lenient check at apply time and the API's stricter one at request time.
// It imports nothing of kvselect's and no ZMQ library.
package zmqaddr
