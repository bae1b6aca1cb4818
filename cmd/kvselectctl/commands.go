package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kvselect/kvselect/internal/version"
)

// newRootCmd builds the command tree. Every command is built afresh per
// run, its flags bound to variables of that run.
func newRootCmd(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "kvselectctl",
		Short: "administer and inspect a kvselect cluster",
		Long:  rootLong,
		Example: `  kvselectctl --addr n1:8092,n2:8092 cluster status
  kvselectctl workers add --id 1 --model llama --endpoint http://w1:8000 --block-size 16 --kv-events tcp://w1:5557
  kvselectctl workers add @worker.json
  kvselectctl select --model llama --tokens 1,2,3,4
  kvselectctl --json loads
  source <(kvselectctl completion bash)`,
		Version: version.Get().String(),
		// report prints errors, with a pointer to --help rather than the
		// whole usage.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if err := applyEnv(root.PersistentFlags()); err != nil {
			return err
		}
		e.startTimeout()
		return nil
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetVersionTemplate("kvselectctl {{.Version}}\n")
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(flagError)
	root.SetHelpCommand(helpCmd())
	e.g.register(root.PersistentFlags())
	_ = root.MarkPersistentFlagFilename("token-file")
	_ = root.MarkPersistentFlagFilename("ca-file")
	root.Flags().Bool("version", false, "print the version, commit and Go version, and exit")

	root.AddCommand(clusterCmd(e), workersCmd(e), selectCmd(e), reservationsCmd(e), loadsCmd(e), thresholdsCmd(e), policiesCmd(e), replicaSyncCmd(e), dumpCmd(e))
	root.InitDefaultCompletionCmd()
	if completion, _, err := root.Find([]string{"completion"}); err == nil {
		completion.Short = "print the shell completion script for bash, zsh, fish or powershell"
	}
	finish(root)
	return root
}

const rootLong = `kvselectctl administers and inspects a kvselect cluster over HTTP. Writes
and linearizable reads follow the leader; other reads go to the first
address that answers. --timeout bounds the whole command, retries and
waits included. While a write waits for a leader, a line on stderr says
so each second (the first once a node has answered no_leader: a node
holds a write for its --leader-wait, 5 s by default, before it does).

Tables are for people; --json prints the server's JSON, indented.

Every global flag can also be set through KVSELECT_<FLAG>, for example
KVSELECT_ADDR, KVSELECT_TOKEN_FILE, KVSELECT_TOKEN or KVSELECT_CA_FILE;
the command line wins. A cluster that serves HTTPS takes https:// URLs
in --addr, and --ca-file when its CA is its own.

Exit status: 0 on success; 1 when a request fails or the server answers
with an error ("kvselectctl: <code>: <message> (HTTP <status>)"); 2 for a
wrong command line (unknown command or flag, wrong arguments).`

// usageTemplate is cobra's, but a command with subcommands shows one
// usage line: kvselectctl and its groups run only to say that a
// subcommand is missing.
const usageTemplate = `Usage:{{if .HasAvailableSubCommands}}
  {{.CommandPath}} <command> [flags]{{else}}
  {{.UseLine}}{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} <command> --help" for more information about a command.{{end}}
`

// group is a command that holds subcommands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{Use: use, Short: short}
	g.AddCommand(subs...)
	return g
}

// leaf is a command that takes between minArgs and maxArgs positional
// arguments (flags may come before, between or after them).
func leaf(use, short string, minArgs, maxArgs int, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: between(minArgs, maxArgs), RunE: run}
	if maxArgs == 0 {
		cmd.ValidArgsFunction = cobra.NoFileCompletions
	}
	return cmd
}

// finish walks the tree once every command is in it (cobra's completion
// command too). A command that only holds subcommands runs, so that a
// missing or unknown subcommand is a usage error (cobra would print the
// help and exit 0); and every failed argument check is a usage error.
func finish(c *cobra.Command) {
	c.SuggestionsMinimumDistance = 2 // cobra's default, which SuggestionsFor does not apply
	if c.HasSubCommands() && !c.Runnable() {
		c.Args, c.RunE = subcommandArgs, missingSubcommand
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return asUsageError(err)
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		finish(sub)
	}
}

func asUsageError(err error) error {
	if _, ok := err.(*usageError); ok {
		return err
	}
	return &usageError{msg: err.Error()}
}

// between checks the number of positional arguments.
func between(minArgs, maxArgs int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < minArgs || (maxArgs >= 0 && len(args) > maxArgs) { // maxArgs < 0: no limit
			return usageErrorf("%s: wrong number of arguments\nusage: %s", commandName(cmd), cmd.UseLine())
		}
		return nil
	}
}

// subcommandArgs is a group's argument check: an argument there is a
// subcommand that does not exist.
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return unknownCommand(cmd, args[0])
}

func unknownCommand(parent *cobra.Command, name string) error {
	return &usageError{msg: fmt.Sprintf("unknown command %q for %q%s", name, parent.CommandPath(), didYouMean(parent.SuggestionsFor(name))),
		help: parent}
}

// misspeltCommand finds, before any flag is parsed, a word of args that
// stands where a subcommand must and names none: "kvselectctl selct
// --model x" is an unknown command "selct", not an unknown flag --model
// of kvselectctl. A flag the command does not know ends the search (it
// may take a value, which is no command name); cobra reports it.
func misspeltCommand(root *cobra.Command, args []string) error {
	cmd, rest, err := root.Find(args)
	if err != nil {
		cmd, rest = root, args // a misspelt first word: cobra's Find complains already
	}
	if !cmd.HasSubCommands() {
		return nil
	}
	name := firstWord(cmd, rest)
	switch name {
	case "", "help", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd: // help and __complete are added as the tree runs
		return nil
	}
	for _, sub := range cmd.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return nil
		}
	}
	return unknownCommand(cmd, name)
}

// firstWord is the first argument that is neither a flag of cmd nor a
// flag's value; "" when there is none, or when an unknown flag comes
// first.
func firstWord(cmd *cobra.Command, args []string) string {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" || arg == "-" {
			return ""
		}
		name, isFlag := strings.CutPrefix(arg, "-")
		if !isFlag {
			return arg
		}
		var f *pflag.Flag
		if long, ok := strings.CutPrefix(name, "-"); ok {
			long, _, _ = strings.Cut(long, "=")
			f = cmd.Flags().Lookup(long)
			if f == nil {
				f = cmd.InheritedFlags().Lookup(long)
			}
			if f == nil && long != "help" {
				return ""
			}
		} else {
			f = cmd.Flags().ShorthandLookup(name[:1])
			if f == nil {
				f = cmd.InheritedFlags().ShorthandLookup(name[:1])
			}
			if f == nil && name != "h" {
				return ""
			}
			if len(name) > 1 {
				continue // -x=value or -xvalue
			}
		}
		if f != nil && f.NoOptDefVal == "" && !strings.Contains(arg, "=") {
			i++ // its value
		}
	}
	return ""
}

// missingSubcommand is what a group does when run alone.
func missingSubcommand(cmd *cobra.Command, _ []string) error {
	if !cmd.HasParent() {
		return usageErrorf("missing command")
	}
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return usageErrorf("%s: missing subcommand (want one of: %s)", commandName(cmd), strings.Join(names, ", "))
}

// commandName is the command's path without "kvselectctl ".
func commandName(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// didYouMean words suggestions as cobra does.
func didYouMean(suggestions []string) string {
	if len(suggestions) == 0 {
		return ""
	}
	return "\n\nDid you mean this?\n\t" + strings.Join(suggestions, "\n\t") + "\n"
}

// helpCmd is "help [command]": the help of any command, as
// "<command> --help" prints it; a command that does not exist is a usage
// error with suggestions (cobra's own help command exits 0).
func helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "help about any command",
		Long:  "Help about any command: 'kvselectctl help workers add' is 'kvselectctl workers add --help'.",
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []cobra.Completion
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
					names = append(names, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil {
				return asUsageError(err)
			}
			for _, arg := range rest {
				if !strings.HasPrefix(arg, "-") {
					return unknownCommand(cmd, arg)
				}
			}
			cmd.InitDefaultHelpFlag() // as when it runs, so the help is the same
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}
