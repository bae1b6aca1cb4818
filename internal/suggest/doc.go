// Package suggest finds the names a user probably meant when a command
// line names a flag or command that does not exist ("did you mean
// --port?"). kvselect and kvselectctl word their errors with it.
package suggest
