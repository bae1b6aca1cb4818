// Package docscheck holds the test that keeps README.md and docs/ standing
// alone: a clone has nothing beside the repository, so the prose may not
// send a reader to the project's private reference material, and every
// relative link (a file, or a heading in a Markdown file) must resolve in
// the repository itself. It has no code of its own.
package docscheck
