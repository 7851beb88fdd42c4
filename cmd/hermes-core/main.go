// Command hermes-core is the hermes command line: it runs shell commands
// for AI agents, in the foreground or as detached background jobs, and
// keeps a durable receipt of each result. Users run it through the front
// binary, hermes (cmd/hermes), which execs it for every command it does not
// hand to a running supervisor; run directly, it does the same work
// without that shortcut.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"

	"github.com/hermesrun/hermes/internal/handoff"
	// For the heap it advises from its initialiser, which Go runs before
	// most of the others (package hugeheap; what it buys: bench/RESULTS.md,
	// "The front binary").
	_ "github.com/hermesrun/hermes/internal/hugeheap"
	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// version, commit and buildDate are stamped by the build (-ldflags
// "-X main.version=… -X main.commit=… -X main.buildDate=…", see
// scripts/release.sh); a plain go build reports the module version or
// "dev" and the VCS revision Go recorded, if any.
var (
	version   = ""
	commit    = ""
	buildDate = ""
)

// CLI is the command tree.
type CLI struct {
	JSON    bool             `help:"Print machine-readable JSON." name:"json"`
	Version kong.VersionFlag `help:"Print the version and exit."`
	// Runner and RunnerToken point the process commands at a shared
	// runner (hermes serve) instead of this profile.
	Runner      string `help:"URL of a shared hermes runner (hermes serve) to use instead of this profile." env:"HERMES_RUNNER_URL" placeholder:"URL"`
	RunnerToken string `help:"Bearer token for --runner." env:"HERMES_RUNNER_TOKEN" placeholder:"TOKEN"`
	// RunnerTokenFile reads the token from a file: a mounted Secret.
	RunnerTokenFile string `help:"File holding the bearer token for --runner: the token alone, or a runner tokens file (its first token is used)." env:"HERMES_RUNNER_TOKEN_FILE" placeholder:"FILE" type:"existingfile"`

	Run     RunCmd     `cmd:"" help:"Run a command in the foreground, or start it in the background."`
	Ps      PsCmd      `cmd:"" help:"List processes: live ones, and retained receipts with --retained."`
	Log     LogCmd     `cmd:"" help:"Show a process's output and status."`
	Poll    PollCmd    `cmd:"" help:"Show a process's status and output tail without consuming its completion."`
	Inspect InspectCmd `cmd:"" help:"Print a process's whole record as JSON: its receipt once it has ended, its live record before."`
	Rm      RmCmd      `cmd:"" help:"Remove receipts now, with their output logs and pending completions (e.g. a secret slipped past redaction)."`
	Prune   PruneCmd   `cmd:"" help:"Remove the receipts of finished processes now (--older-than, --status)."`
	Wait    WaitCmd    `cmd:"" help:"Wait for a process to finish; exit with its exit code."`
	Kill    KillCmd    `cmd:"" help:"End a process and its whole process group (SIGTERM, then SIGKILL)."`
	Write   WriteCmd   `cmd:"" help:"Write data to a running process's stdin."`
	Cp      CpCmd      `cmd:"" help:"Copy files into or out of a running container or pod job (tar streams, size-capped)."`
	Chat    ChatCmd    `cmd:"" help:"Talk to an agent that runs commands for you (OpenAI-compatible endpoint; terminal and process_manage tools)."`
	Trace   TraceCmd   `cmd:"" help:"Print the trace id of a process (and a Jaeger link with --jaeger)."`
	// Session is the session tree and the completions of notify jobs.
	Session   SessionCmd   `cmd:"" help:"Agent sessions: start, end, show, ls, and take the completions of notify jobs."`
	Shim      ShimCmd      `cmd:"" hidden:"" help:"Supervise one detached job (internal)."`
	Watch     WatchCmd     `cmd:"" hidden:"" help:"Supervise one detached container or pod job (internal)."`
	Supervise SuperviseCmd `cmd:"" hidden:"" help:"Supervise many detached local jobs: a runner's, or those of CLI callers alike (internal)."`
	Serve     ServeCmd     `cmd:"" help:"Run the shared runner: the HTTP JSON API that hermes --runner talks to."`
	// MCP serves the agent tools to MCP hosts (Claude Code, Codex, Cursor, VS Code).
	VersionCommand VersionCmd    `cmd:"" name:"version" help:"Print the version, commit, build date and Go version (--json for a record)."`
	Completion     CompletionCmd `cmd:"" help:"Print a shell completion script (bash, zsh or fish)."`
	UI             UICmd         `cmd:"" name:"ui" help:"Serve this profile's web console on loopback: sessions, jobs, live logs."`
	MCP            MCPCmd        `cmd:"" name:"mcp" help:"Serve the Model Context Protocol over stdio: the terminal and process_manage tools, processes as resources, completions as notifications."`
	Hook           HookCmd       `cmd:"" help:"Run as an agent host's hook (Claude Code, Codex): hand the host the completions of its session, one follow-up turn each (hermes mcp install writes the hooks)."`
}

// exitTempFail is the exit status of a start the profile's limits turned
// away for now (EX_TEMPFAIL): trying again later may succeed.
const exitTempFail = 75

// exitError carries an exit status out of a command without printing
// anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	// go-redis reports connection failures on its own process-wide logger,
	// which would add lines to hermes's one-line errors; the same failures
	// reach hermes as returned errors, so its logger stays silent.
	redis.SetLogger(silentRedisLog{})
	// Likewise the OpenTelemetry SDK reports failed exports through a
	// process-wide handler that prints to stderr; an unreachable collector
	// must not garble command output. Spans are best effort.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type silentRedisLog struct{}

func (silentRedisLog) Printf(context.Context, string, ...any) {}

// Globals are what every command gets.
type Globals struct {
	JSON bool
	// Stdin is the command's input; nil is os.Stdin.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Environ is the environment Getenv reads, which local jobs start
	// from; nil is os.Environ().
	Environ []string
	// Getwd returns the working directory commands resolve against; nil
	// is os.Getwd.
	Getwd func() (string, error)
	// RunnerURL and RunnerToken, when set, send process commands to a
	// shared runner.
	RunnerURL   string
	RunnerToken string
	// interrupts routes Ctrl-C; nil (a test's Globals) leaves it to the
	// command's context.
	interrupts *interrupts
	// listCache and redisClients outlive the command: the supervisor
	// running handed-off commands keeps one of each, shared by all the
	// commands (receipts.ListCache, redisdb.Clients).
	listCache    *receipts.ListCache
	redisClients *redisdb.Clients
	// unserved is the caller supervisor's socket when this command could
	// have been handed off but nobody listened there (handoff.Unserved).
	unserved string
}

// getwd is the directory the command resolves against.
func (g *Globals) getwd() (string, error) {
	if g.Getwd != nil {
		return g.Getwd()
	}
	return os.Getwd()
}

// run is this process's command, with its signals: SIGTERM ends it, and
// so does Ctrl-C unless the command routes it elsewhere.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == "shim" {
		// Started for every local job, and taking no flags: building the
		// CLI's parser (kong's reflection over every command, a tenth of
		// a shim's own CPU before its job starts) buys it nothing.
		if err := (&ShimCmd{}).Run(&Globals{Stdout: stdout, Stderr: stderr, Getenv: os.Getenv}); err != nil {
			fmt.Fprintf(stderr, "hermes: error: %s\n", oneLine(err.Error()))
			return 1
		}
		return 0
	}
	// A signal this process inherited ignored stays ignored: a shell's
	// background jobs ignore SIGINT, and so must this process's children;
	// and the caller key the front computed (package handoff) must still
	// hold when a background start computes it again.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !signal.Ignored(syscall.SIGTERM) {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGTERM)
		defer stop()
	}
	// Ctrl-C ends the command, unless the command routes it elsewhere
	// for a while (hermes chat: the turn in progress).
	intr := &interrupts{}
	if !signal.Ignored(os.Interrupt) {
		sigint := make(chan os.Signal, 1)
		signal.Notify(sigint, os.Interrupt)
		defer signal.Stop(sigint)
		go func() {
			for {
				select {
				case <-sigint:
					if !intr.deliver() {
						cancel()
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	return command(ctx, args, &Globals{Stdout: stdout, Stderr: stderr, Getenv: os.Getenv, interrupts: intr,
		unserved: handoff.Unserved(args, os.Environ())})
}

// command parses args and runs the command with g's descriptors and
// environment (the other fields of g are filled from the command line).
func command(ctx context.Context, args []string, g *Globals) int {
	stdout, stderr := g.Stdout, g.Stderr
	var cli CLI
	kctx, exitCode, err := parse(&cli, helpCommand(args), stdout, stderr,
		kong.Name("hermes"),
		kong.Description("hermes runs shell commands for AI agents: in the foreground, or as detached background jobs whose results outlive the command that started them. Each finished process leaves a bounded, redacted, session-scoped receipt under $HERMES_HOME (or in Redis)."),
		kong.Vars{"version": versionString()},
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
	if errors.Is(err, errCommandTree) {
		fmt.Fprintf(stderr, "hermes: internal error: %v\n", err)
		return 70
	}
	if exitCode >= 0 { // --help or --version
		return exitCode
	}
	if err != nil {
		fmt.Fprintf(stderr, "hermes: error: %s (see %s --help)\n", oneLine(err.Error()), helpFor(err))
		return 2
	}
	if err := service.CheckLabel("HERMES_SESSION_ID", g.Getenv("HERMES_SESSION_ID")); err != nil {
		fmt.Fprintf(stderr, "hermes: error: %s\n", err)
		return 2
	}
	g.JSON = cli.JSON
	g.RunnerURL, g.RunnerToken = cli.Runner, cli.RunnerToken
	if cli.RunnerTokenFile != "" && g.RunnerToken == "" {
		tok, err := firstToken(cli.RunnerTokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "hermes: error: --runner-token-file: %s\n", oneLine(err.Error()))
			return 2
		}
		g.RunnerToken = tok
	}
	kctx.BindTo(ctx, (*context.Context)(nil))
	err = kctx.Run(g)
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		var ue usageError
		fmt.Fprintf(stderr, "hermes: error: %s\n", oneLine(err.Error()))
		if errors.As(err, &ue) || errors.Is(err, service.ErrInvalid) {
			return 2
		}
		if errors.Is(err, admission.ErrRefused) || errors.Is(err, service.ErrBusy) {
			return exitTempFail
		}
		return 1
	}
}

// helpCommand reads `hermes help [CMD...]` as `hermes [CMD...] --help`, as
// git and docker users expect.
func helpCommand(args []string) []string {
	if len(args) == 0 || args[0] != "help" {
		return args
	}
	rest := args[1:]
	if i := slices.Index(rest, "--"); i >= 0 {
		rest = rest[:i] // what follows -- is a command's, not hermes's
	}
	return append(slices.Clone(rest), "--help")
}

// helpFor is the command whose help a usage error points to: the deepest
// command the parser reached ("hermes session ls"), else hermes itself.
func helpFor(err error) string {
	var pe *kong.ParseError
	if !errors.As(err, &pe) || pe.Context == nil {
		return "hermes"
	}
	for i := len(pe.Context.Path) - 1; i >= 0; i-- {
		if c := pe.Context.Path[i].Command; c != nil {
			return c.FullPath()
		}
	}
	return "hermes"
}

// maxTokenFile bounds a token file: a tokens file of many tenants at most.
const maxTokenFile = 1 << 20

// firstToken reads a bearer token from path: the first word of the first
// line that is neither empty nor a comment, so that both a file holding
// the token alone and a runner's "TOKEN TENANT" tokens file work.
func firstToken(path string) (string, error) {
	// Symlinks are followed: a mounted Secret is a symlink to its data.
	// The target must still be a regular file (a FIFO would block).
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			return f[0], nil
		}
	}
	return "", fmt.Errorf("%s holds no token", path)
}

// usageError marks bad input, which exits 2 like a parse error.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func badInput(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// maxErrorLine bounds the one-line error: whatever input an error repeats,
// it never floods the terminal.
const maxErrorLine = 400

// oneLine folds s onto one line, escapes control characters (an error may
// repeat input that holds terminal escapes) and clips it to maxErrorLine.
func oneLine(s string) string {
	return service.ClipTo(strings.Join(strings.Fields(s), " "), maxErrorLine)
}
