package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Test_Help checks what help at each level tells: usage, subcommands,
// flags, the global flags with their variables, the exit codes.
func Test_Help(t *testing.T) {
	rootWants := []string{"Usage:\n  kvselectctl <command> [flags]\n", "Commands:\n  cluster ", "\n  workers ", "\n  completion ",
		"--addr URLs", "(env KVSELECT_TOKEN_FILE)", "Exit status: 0 on success", "2 for a\nwrong command line"}
	addWants := []string{"Usage:\n  kvselectctl workers add (<json> | @file | --id N [field flags]) [flags]\n",
		"Examples:\n", "--kv-events endpoint", "--block-size uint32", "Global Flags:\n      --addr URLs"}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "--help", args: []string{"--help"}, want: rootWants},
		{name: "-h", args: []string{"-h"}, want: rootWants},
		{name: "help", args: []string{"help"}, want: rootWants},
		{name: "group", args: []string{"workers", "--help"},
			want: []string{"Usage:\n  kvselectctl workers <command> [flags]\n", "\n  add ", "\n  list ", "\n  patch ", "\n  rm ",
				"Global Flags:\n", `Use "kvselectctl workers <command> --help"`}},
		{name: "group -h after a global flag", args: []string{"--json", "cluster", "-h"},
			want: []string{"Usage:\n  kvselectctl cluster <command> [flags]\n", "\n  stepdown "}},
		{name: "help <group>", args: []string{"help", "thresholds"}, want: []string{"\n  clear ", "\n  set "}},
		{name: "policies", args: []string{"policies", "set", "--help"},
			want: []string{"Usage:\n  kvselectctl policies set --model M [--tenant T] --policy P [--param name=value]... [flags]\n",
				"--param name=value", "--model '*' --policy dynamo-default"}},
		{name: "command", args: []string{"workers", "add", "--help"}, want: addWants},
		{name: "command -h among its arguments", args: []string{"workers", "add", "--id", "1", "-h"}, want: addWants},
		{name: "help <group> <command>", args: []string{"help", "workers", "add"}, want: addWants},
		{name: "one-word command", args: []string{"select", "--help"},
			want: []string{"Usage:\n  kvselectctl select [flags]\n", "--tokens 1,2,3", "--reserve string"}},
		{name: "stepdown says what it prints", args: []string{"cluster", "stepdown", "--help"},
			want: []string{"Usage:\n  kvselectctl cluster stepdown [flags]\n", "--timeout"}},
		{name: "completion", args: []string{"completion", "--help"},
			want: []string{"Usage:\n  kvselectctl completion <command> [flags]\n", "\n  bash ", "\n  zsh ", "\n  fish ", "\n  powershell "}},
		{name: "help of help", args: []string{"help", "help"}, want: []string{"Usage:\n  kvselectctl help [command] [flags]\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, tt.args...)
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("help lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// Test_HelpEveryCommand walks the whole tree: every command answers
// "<command> --help" and "help <command>" alike, on stdout, with its own
// usage line.
func Test_HelpEveryCommand(t *testing.T) {
	e := &env{g: defaultGlobals(), ctx: context.Background(), stdout: io.Discard, stderr: io.Discard}
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(newRootCmd(e), nil)
	if len(paths) < 25 {
		t.Fatalf("only %d commands in the tree: %v", len(paths), paths)
	}
	for _, path := range paths {
		t.Run(strings.Join(append([]string{"kvselectctl"}, path...), " "), func(t *testing.T) {
			byFlag, errOut, code := runCLI(t, append(path, "--help")...)
			if code != exitOK || errOut != "" {
				t.Fatalf("--help: exit %d, stderr %q", code, errOut)
			}
			byCommand, errOut, code := runCLI(t, append([]string{"help"}, path...)...)
			if code != exitOK || errOut != "" || byCommand != byFlag {
				t.Fatalf("help: exit %d, stderr %q, and it differs from --help:\n%s\n--help:\n%s", code, errOut, byCommand, byFlag)
			}
			if want := "\nUsage:\n  " + strings.Join(append([]string{"kvselectctl"}, path...), " "); !strings.Contains(byFlag, want) {
				t.Fatalf("no usage line %q:\n%s", want, byFlag)
			}
		})
	}
}

// Test_Completion checks the scripts of each shell and the answers they
// ask kvselectctl for at a tab.
func Test_Completion(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantPrefix string
		wantAlso   string
	}{
		{name: "bash", args: []string{"completion", "bash"}, wantPrefix: "# bash completion V2 for kvselectctl",
			wantAlso: "complete -o default -F __start_kvselectctl kvselectctl"},
		{name: "zsh", args: []string{"completion", "zsh"}, wantPrefix: "#compdef kvselectctl", wantAlso: "__kvselectctl_debug"},
		{name: "fish", args: []string{"completion", "fish"}, wantPrefix: "# fish completion for kvselectctl",
			wantAlso: "complete -c kvselectctl "},
		{name: "powershell", args: []string{"completion", "powershell"}, wantPrefix: "# powershell completion for kvselectctl",
			wantAlso: "Register-ArgumentCompleter"},
		{name: "a tab after a group: its commands", args: []string{"__complete", "workers", ""},
			wantPrefix: "add\tregister or replace a worker", wantAlso: "\nrm\tremove a worker"},
		{name: "a tab in a flag", args: []string{"__complete", "workers", "add", "--kv"}, wantPrefix: "--kv-events\t"},
		{name: "a tab in a global flag", args: []string{"__complete", "loads", "--js"}, wantPrefix: "--json\t"},
		{name: "a tab after help", args: []string{"__complete", "help", "clu"}, wantPrefix: "cluster\t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, tt.args...)
			if code != exitOK || !strings.HasPrefix(out, tt.wantPrefix) || !strings.Contains(out, tt.wantAlso) {
				t.Fatalf("exit %d, stderr %q, stdout starts %q; want %q ... %q", code, errOut, out[:min(len(out), 200)],
					tt.wantPrefix, tt.wantAlso)
			}
		})
	}
	// The bash script is valid bash, where bash is installed.
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to check the script's syntax")
	}
	script, _, _ := runCLI(t, "completion", "bash")
	file := filepath.Join(t.TempDir(), "kvselectctl.bash")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bash, "-n", file).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
}

// Test_OneDashLongFlags: -name and -name=value become --name..., as Go's
// flag package read them; shorthands, values and what follows "--" stay.
func Test_OneDashLongFlags(t *testing.T) {
	e := &env{g: defaultGlobals(), ctx: context.Background(), stdout: io.Discard, stderr: io.Discard}
	root := newRootCmd(e)
	got := oneDashLongFlags(root, []string{"-addr", "h:1", "-json", "workers", "add", "-model=m", "-h", "-1", "-nope", "--id", "2",
		"--", "-tenant"})
	want := []string{"--addr", "h:1", "--json", "workers", "add", "--model=m", "-h", "-1", "-nope", "--id", "2", "--", "-tenant"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}
