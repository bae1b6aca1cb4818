package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/server/nodeflags"
)

// captureHelp sends the help to a buffer for the rest of the test.
func captureHelp(t *testing.T) *bytes.Buffer {
	var buf bytes.Buffer
	old := nodeflags.HelpOut
	nodeflags.HelpOut = &buf
	t.Cleanup(func() { nodeflags.HelpOut = old })
	return &buf
}

// Test_BadCommandLine: a wrong command line is one line that names what
// is wrong, with the nearest flag or command, and exit status 2; the help
// is not printed.
func Test_BadCommandLine(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--prot", "1"}, "unknown flag --prot (did you mean --port?); run kvselect --help for the flags"},
		{[]string{"-prot", "1"}, "unknown flag --prot (did you mean --port?); run kvselect --help for the flags"},
		{[]string{"--bogus-flag"}, "unknown flag --bogus-flag; run kvselect --help for the flags"},
		{[]string{"--raft"}, "unknown flag --raft (did you mean --raft-addr, --raft-advertise, --raft-commit-timeout, …?); run kvselect --help for the flags"},
		{[]string{"--peer-dail", "x"}, "unknown flag --peer-dail; run kvselect --help for the flags"}, // a hidden flag is not suggested
		{[]string{"--port"}, "flag needs an argument: --port; run kvselect --help for the flags"},
		{[]string{"--port", "x"}, `invalid value "x" for flag --port: parse error; run kvselect --help for the flags`},
		{[]string{"slot-traker"}, `unknown command "slot-traker" (did you mean slot-tracker?); run kvselect --help for the flags`},
		{[]string{"--port", "1", "extra"}, `unknown command "extra"; run kvselect --help for the flags`},
		{[]string{"help", "bogus"}, `help: unknown command "bogus" (kvselect has one: slot-tracker); run kvselect --help for the flags`},
		{[]string{"slot-tracker", "--prot", "2"}, "unknown flag --prot (did you mean --port?); run kvselect slot-tracker --help for the flags"},
		{[]string{"slot-tracker", "extra"}, `unexpected argument "extra" (kvselect slot-tracker takes flags only); run kvselect slot-tracker --help for the flags`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			help := captureHelp(t)
			err := run(tt.args)
			if err == nil || err.Error() != tt.want || nodeflags.ExitCode(err) != nodeflags.ExitUsage {
				t.Fatalf("run = %v (exit %d)\nwant %s (exit %d)", err, nodeflags.ExitCode(err), tt.want, nodeflags.ExitUsage)
			}
			if strings.Contains(err.Error(), "\n") || help.Len() > 0 {
				t.Fatalf("more than one line, or help printed:\n%s", help)
			}
		})
	}
	if got := nodeflags.ExitCode(errors.New("--threads must be at least 1")); got != nodeflags.ExitError {
		t.Fatalf("a bad value is exit %d, want %d", got, nodeflags.ExitError)
	}
}

// Test_HelpCommand: "kvselect help", -h, --help and --help-all print the
// help on stdout and succeed; the default help leaves out the test
// harnesses' flags (still parsed, see Test_ParseConfigPrecedence), and
// every flag it lists names its environment variable.
func Test_HelpCommand(t *testing.T) {
	helpOf := func(args ...string) string {
		t.Helper()
		help := captureHelp(t)
		if err := run(args); err != nil {
			t.Fatalf("kvselect %s: %v", strings.Join(args, " "), err)
		}
		return help.String()
	}
	byCommand, byFlag, short, all := helpOf("help"), helpOf("--help"), helpOf("-h"), helpOf("--help-all")
	if byCommand != byFlag || byFlag != short {
		t.Fatalf("help, --help and -h differ:\n%s\n--help:\n%s\n-h:\n%s", byCommand, byFlag, short)
	}
	for _, want := range []string{"Usage:\n  kvselect [flags]", "kvselect slot-tracker [flags]", "  -raft-addr string",
		"(env KVSELECT_RAFT_ADDR)", "(env KVSELECT_OVERLAP_SCORE_WEIGHT, DYN_KV_OVERLAP_SCORE_WEIGHT, DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT)",
		"2 flags for test harnesses (fault injection) are not shown: kvselect --help-all lists every flag."} {
		if !strings.Contains(byFlag, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for name := range nodeflags.TestOnly {
		if strings.Contains(byFlag, "  -"+name+" ") {
			t.Errorf("--help lists the test-only flag --%s", name)
		}
		if !strings.Contains(all, "  -"+name+" ") {
			t.Errorf("--help-all lacks the test-only flag --%s", name)
		}
	}
	if !strings.Contains(all, "(env KVSELECT_PEER_DIAL)") || strings.Contains(all, "not shown") {
		t.Errorf("--help-all:\n%s", all)
	}
	// Every flag but --help-all and --version has its variable.
	blocks := strings.Split(byFlag, "\n  -")[1:]
	for _, b := range blocks {
		name := strings.Fields(b)[0]
		if name != "help-all" && name != "version" && !strings.Contains(b, "(env KVSELECT_") {
			t.Errorf("--%s lists no environment variable:\n%s", name, b)
		}
	}
	if len(blocks) < 50 {
		t.Fatalf("only %d flags in the help", len(blocks))
	}
	tracker := helpOf("help", "slot-tracker")
	if tracker != helpOf("slot-tracker", "--help") || !strings.Contains(tracker, "Usage: kvselect slot-tracker [flags]") ||
		!strings.Contains(tracker, "(env KVSELECT_ACTIVE_REQUEST_EXPIRY_SECS, DYN_ROUTER_ACTIVE_REQUEST_EXPIRY_SECS)") {
		t.Fatalf("help slot-tracker:\n%s", tracker)
	}
}
