package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is one entry of the dispatch table.
type command struct {
	name    string // one or two words: "loads", "cluster status"
	args    string // positional arguments and flags, for the usage text
	summary string
	run     func(e *env, args []string) error
}

func (c command) synopsis() string {
	if c.args == "" {
		return c.name
	}
	return c.name + " " + c.args
}

// commandTable is every command, in the order the usage lists them. It is
// a function, not a variable, because the commands print it themselves.
func commandTable() []command {
	return []command{
		{"cluster status", "", "this node's view of the leader and the members (GET /cluster/status)", clusterStatusCmd},
		{"cluster join", "<id> <raft_addr> [<http_addr>]", "add a voter (POST /cluster/join)", clusterJoinCmd},
		{"cluster remove", "<id>", "remove a member (POST /cluster/remove)", clusterRemoveCmd},
		{"cluster stepdown", "", "hand leadership to another voter (POST /cluster/stepdown)", clusterStepDownCmd},
		{"workers list", "[--model M] [--tenant T] [--linearizable]", "catalog records with lifecycle and listener states (GET /workers)", workersListCmd},
		{"workers add", "(<json> | @file | --id N [field flags])", "register or replace a worker (POST /workers); 'workers add -h' lists the field flags", workersAddCmd},
		{"workers patch", "<id> (<json> | @file | field flags as for add)", "change only the given fields of a worker (PATCH /workers/{id})", workersPatchCmd},
		{"workers rm", "<id>", "remove a worker (DELETE /workers/{id})", workersRemoveCmd},
		{"select", "[--model M] [--tenant T] (--tokens 1,2,3 | --json-body JSON|@file) [--min-index N] [--selection-id ID] [--reserve ID]",
			"choose a worker and rank for a prompt (POST /select); with --reserve, book it too (/select_and_reserve)", selectCmd},
		{"reservations list", "[--model M] [--tenant T] [--worker N] [--limit N] [--cursor C]",
			"the node's bookings, sorted by id, a page at a time (GET /reservations)", reservationsListCmd},
		{"reservations show", "<id>", "one booking (GET /reservations/{id})", reservationsShowCmd},
		{"loads", "[--model M] [--tenant T]", "active load of every rank, per partition (GET /loads)", loadsCmd},
		{"thresholds list", "[--linearizable]", "every model's busy thresholds (GET /busy_threshold)", thresholdsListCmd},
		{"thresholds set", "<model> [--decode F] [--prefill N]", "set a model's busy thresholds, keeping the other (POST /busy_threshold)", thresholdsSetCmd},
		{"thresholds clear", "<model>", "unset a model's busy thresholds: its workers are never shed (DELETE /busy_threshold)", thresholdsClearCmd},
		{"dump", "[--out FILE]", "the index snapshot, as the server sends it (GET /dump)", dumpCmd},
	}
}

// findCommand matches the first one or two words of args to a command and
// returns the rest.
func findCommand(args []string) (command, []string, error) {
	if len(args) == 0 {
		return command{}, nil, usageErrorf("missing command")
	}
	table := commandTable()
	for _, c := range table {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == c.name {
			return c, args[len(words):], nil
		}
	}
	var subs []string
	for _, c := range table {
		if group, sub, ok := strings.Cut(c.name, " "); ok && group == args[0] {
			subs = append(subs, sub)
		}
	}
	if len(subs) > 0 {
		return command{}, nil, usageErrorf("%s: unknown or missing subcommand (want one of: %s)", args[0], strings.Join(subs, ", "))
	}
	return command{}, nil, usageErrorf("unknown command %q", args[0])
}

// printUsage is kvselectctl -h.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage: kvselectctl [global flags] <command> [args]

kvselectctl administers and inspects a kvselect cluster over HTTP. Writes
and linearizable reads follow the leader; other reads go to the first
address that answers.

Commands:
`)
	for _, c := range commandTable() {
		fmt.Fprintf(w, "  %s\n      %s\n", c.synopsis(), c.summary)
	}
	fmt.Fprint(w, `
Run 'kvselectctl <command> -h' for a command's arguments.

Global flags (also accepted after the command; each can be set through
KVSELECT_<FLAG>, for example KVSELECT_ADDR or KVSELECT_TOKEN_FILE):
`)
	fs.PrintDefaults()
	fmt.Fprint(w, `
Exit status: 0 on success, 1 when a request fails or the server answers
with an error ("kvselectctl: <code>: <message> (HTTP <status>)"), 2 for a
wrong command line.
`)
}

// printCommandUsage is kvselectctl <command> -h: the synopsis and the
// command's own flags (the global ones are listed by kvselectctl -h).
func printCommandUsage(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: kvselectctl %s\n\n%s.\n", c.synopsis(), capitalize(c.summary))
	own := flag.NewFlagSet(c.name, flag.ContinueOnError)
	own.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		if !isGlobal(f.Name) {
			own.Var(f.Value, f.Name, f.Usage)
		}
	})
	if hasFlags(own) {
		fmt.Fprintln(w, "\nFlags:")
		own.PrintDefaults()
	}
	fmt.Fprintln(w, "\nGlobal flags (--addr, --token-file, --json, --timeout) are accepted too; see kvselectctl -h.")
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
