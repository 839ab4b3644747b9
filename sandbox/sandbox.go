package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
)

// RuntimeDir is the name every package reserves for airlock's own files
// inside a sandbox directory and a work tree (".airlock"): stage's bundles,
// workspace's state, deliverable's queue. No staged asset, restored file or
// registered deliverable may be named it.
const RuntimeDir = ".airlock"

// Command is one POSIX sh script to run in the sandbox.
//
// Env is bounded by MaxEnvEntryBytes and MaxEnvBytes; names must be shell
// names and must not start with "__airlock_" (reserved for the wrappers;
// CheckEnv says which is wrong). Every other variable reaches the script
// byte-exact, PATH, TMPDIR and ENV included, except IFS: sh resets IFS to
// space, tab and newline when it starts (POSIX), on every Runner, so a
// script sees the default IFS whatever Env says; set IFS in the script.
type Command struct {
	Script string            // POSIX sh script
	Env    map[string]string // delivered without ever appearing in argv; see below
	Dir    string            // working directory; "" means the Runner's default
	Stdin  io.Reader         // nil: empty
	Stdout io.Writer         // nil: discarded
	Stderr io.Writer         // nil: discarded
}

// Runner runs commands in a sandbox. It is all a command-only provider
// (Kubernetes exec, Docker, Daytona, E2B, …) has to offer.
//
// The contract, which stagetest.TestRunner checks:
//   - Run returns nil when the script exited with status 0, and an error
//     that errors.As finds as *ExitError when it ran and exited otherwise
//     (Status -1 and the signal's name when a signal ended it).
//   - Any other error means the command could not be run or followed to its
//     end, and wraps ErrTransport. A Runner that cannot tell (an exec client
//     whose exit status mixes the two) must not guess: Exec's completion
//     record is the way to tell. A sandbox that answered but broke the
//     Runner's own protocol (a garbled completion record) wraps
//     ErrProtocol instead. The host's own failures keep their own error,
//     not ErrTransport: a write to Stdout or Stderr that failed is
//     returned wrapping the writer's error, and a host file the Runner
//     could not create or write (a temporary file on a full disk) as an
//     error wrapping the *fs.PathError that names it (Control tells these
//     apart the same way).
//   - Stdin is delivered byte-exact and then closed (EOF); Stdout and Stderr
//     receive the script's output byte-exact, kept apart.
//   - Env reaches the script byte-exact (any byte but NUL, within
//     MaxEnvEntryBytes and MaxEnvBytes; CheckEnv says which is wrong) and
//     never appears in any command line, on either side.
//   - Dir is the script's working directory; a missing one is an error
//     wrapping fs.ErrNotExist, and nothing runs.
//   - Run should return when ctx ends and stop the command; callers do not
//     rely on it (Control enforces its own deadline).
//   - Scripts of up to 1 MiB run.
type Runner interface {
	// Run runs cmd in the sandbox and waits for it to end.
	Run(ctx context.Context, cmd Command) error
}

// ExitError reports a sandbox command that ran and failed.
type ExitError struct {
	Status int    // exit status; -1 when the command was killed by a signal
	Signal string // the signal's name without "SIG" ("KILL", "TERM"), when one ended the command and the Runner knows it
}

// Error implements error: "exited with status N", or "killed by signal
// NAME" for a command a signal ended.
func (e *ExitError) Error() string {
	switch {
	case e.Status < 0 && e.Signal != "":
		return "killed by signal " + e.Signal
	case e.Status < 0:
		return "killed by a signal"
	}
	return fmt.Sprintf("exited with status %d", e.Status)
}

// FileReader is an optional capability of a Runner: reading one file of the
// sandbox without running a shell (remote.Host reads over SFTP).
type FileReader interface {
	// ReadFile returns the content of the regular file at the absolute
	// sandbox path p. A file that is missing, is a symbolic link (at its
	// last component) or is not a regular file is an error wrapping
	// fs.ErrNotExist; a file of more than max bytes is an error wrapping
	// ErrLimit, and its content is not read past max; one the sandbox may
	// not read is an error wrapping fs.ErrPermission (it may wrap
	// ErrTransport too). Any other failure is a transport failure
	// (ErrTransport).
	ReadFile(ctx context.Context, p string, max int64) ([]byte, error)
}

// FileStater is an optional capability of a Runner: looking up one path
// of the sandbox without running a shell (remote.Host does over SFTP).
type FileStater interface {
	// Lstat returns what is at the absolute sandbox path p, without
	// following a symbolic link at its last component (one at an earlier
	// component is followed, inside the sandbox). A missing p is an error
	// wrapping fs.ErrNotExist; any other failure is a transport failure
	// (ErrTransport) or the server's refusal of the lookup.
	Lstat(ctx context.Context, p string) (fs.FileInfo, error)
}

var (
	// ErrTransport is wrapped by every failure to run a command or to
	// follow it to its end: a lost connection, a client that died, a
	// control deadline that expired, a command whose completion was never
	// reported. The command may or may not have run; a write whose
	// outcome is unknown is never replayed by airlock. Retryable.
	ErrTransport = shell.ErrTransport
	// ErrProtocol is wrapped by every failure of a sandbox that answered
	// but broke the protocol: a malformed or oversized reply, a tar stream
	// with a path that leaves its directory, a record that does not parse.
	// The sandbox is hostile or broken; not retryable.
	ErrProtocol = shell.ErrProtocol
	// ErrLimit is wrapped when something read from the sandbox is larger
	// than the bound the caller set.
	ErrLimit = shell.ErrLimit
	// ErrBadCommand is matched (errors.Is) by a Command or a runner that a
	// Runner refuses before it runs anything: an env that CheckEnv
	// refuses, a TTY flag in Exec's argv, an exec client that could not
	// be started (not installed, not on its PATH, not executable; it
	// wraps the cause, such as exec.ErrNotFound). Nothing ran; trying again
	// unchanged does not help (not Retryable), and Control returns it as
	// it is, never as ErrTransport.
	ErrBadCommand = shell.ErrBadCommand
)

// badCommand is a refusal that matches ErrBadCommand with a message of
// its own, and its cause when it has one.
type badCommand struct {
	msg string
	err error // the cause, or nil
}

func (e *badCommand) Error() string        { return e.msg }
func (e *badCommand) Is(target error) bool { return target == ErrBadCommand }
func (e *badCommand) Unwrap() error        { return e.err }

// refuse returns a *badCommand with the formatted message.
func refuse(format string, args ...any) error {
	return &badCommand{msg: fmt.Sprintf(format, args...)}
}

// MaxControlTimeout caps the deadline of every control step.
const MaxControlTimeout = 30 * time.Second

// ControlTimeouter is an optional capability of a Runner: a control
// deadline of its own, shorter than MaxControlTimeout (remote.Host reports
// its Config.ControlTimeout). Every package that runs control steps through
// a Runner bounds them by ControlDeadline. A Runner that wraps another (to
// set a default Dir, to log) should implement it too and return
// ControlDeadline of the one it wraps, or the setting is lost.
type ControlTimeouter interface {
	// ControlTimeout returns the deadline of one control step; zero or
	// less means MaxControlTimeout.
	ControlTimeout() time.Duration
}

// ControlDeadline returns the deadline of one control step through r:
// MaxControlTimeout, or r's own ControlTimeout when r is a
// ControlTimeouter that reports a shorter positive one.
func ControlDeadline(r Runner) time.Duration {
	if ct, ok := r.(ControlTimeouter); ok {
		return ClampControl(ct.ControlTimeout())
	}
	return MaxControlTimeout
}

// ClampControl maps d onto (0, MaxControlTimeout]: d <= 0 means
// MaxControlTimeout.
func ClampControl(d time.Duration) time.Duration {
	if d <= 0 || d > MaxControlTimeout {
		return MaxControlTimeout
	}
	return d
}

// Progress reports the advance of a long operation (a stage, a workspace
// prepare or restore). Every field only grows during one call: Files and
// Bytes count what is done so far; TotalFiles and TotalBytes are estimates,
// raised if the content turns out larger.
type Progress struct {
	Asset      string // what is being moved: an asset's name, "prepare", "restore"
	Files      int    // regular files done so far
	TotalFiles int    // estimated regular files in all
	Bytes      int64  // bytes of those files so far
	TotalBytes int64  // estimated bytes in all
}

// The bounds of Command.Env. Every Runner of this module checks them before
// it runs anything and fails with an error naming the variable; any value
// within them (newlines, quotes, backslashes, invalid UTF-8, trailing
// newlines: every byte but NUL, which no environment can carry) arrives
// byte-exact, in time linear in its size.
const (
	// MaxEnvEntryBytes bounds one variable: len(name)+len(value)+2 (the
	// "=" and the NUL of its NAME=value string). It is Linux's limit on one
	// string of a new process's environment (MAX_ARG_STRLEN, 128 KiB): a
	// longer one fails every exec in the sandbox with "Argument list too
	// long".
	MaxEnvEntryBytes = 128 << 10
	// MaxEnvBytes bounds all of a command's variables together (the sum of
	// their entries as above), leaving room in the sandbox's ARG_MAX
	// (usually 2 MiB) for its own environment and the script. Pass larger
	// data on Stdin or in a file.
	MaxEnvBytes = 1 << 20
)

// CheckEnv reports the first problem with env that would keep a Runner from
// delivering it: a name that is not a shell name ([A-Za-z_][A-Za-z0-9_]*), a
// name starting with "__airlock_" (reserved for the wrappers' own shell
// variables, on every Runner alike), a value holding NUL, a variable over
// MaxEnvEntryBytes, or a total over MaxEnvBytes. A Runner calls it before
// it runs anything. Its errors match ErrBadCommand.
func CheckEnv(env map[string]string) error {
	total := 0
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		if !validEnvKey(k) {
			return refuse("environment variable name %q is not a shell name ([A-Za-z_][A-Za-z0-9_]*); rename it; nothing was run", k)
		}
		if strings.HasPrefix(k, shell.EnvReserved) {
			return refuse("environment variable %s: names starting with %s are the prelude's own (reserved for airlock's wrappers, on every Runner); rename it; nothing was run", k, shell.EnvReserved)
		}
		if strings.ContainsRune(v, 0) {
			return refuse("environment variable %s: its value holds a NUL byte, which no process environment can carry; nothing was run", k)
		}
		n := len(k) + len(v) + 2
		if n > MaxEnvEntryBytes {
			return refuse("environment variable %s: its NAME=value entry is %d bytes, over the limit of %d (sandbox.MaxEnvEntryBytes, the kernel's limit on one environment string); nothing was run; pass the data on stdin or in a file", k, n, MaxEnvEntryBytes)
		}
		total += n
	}
	if total > MaxEnvBytes {
		return refuse("the environment is %d bytes (NAME=value entries together), over the limit of %d (sandbox.MaxEnvBytes); nothing was run; pass the data on stdin or in a file", total, MaxEnvBytes)
	}
	return nil
}

// validEnvKey reports whether k matches [A-Za-z_][A-Za-z0-9_]*, the names a
// POSIX shell can read.
func validEnvKey(k string) bool {
	if k == "" || ('0' <= k[0] && k[0] <= '9') {
		return false
	}
	for i := 0; i < len(k); i++ {
		switch b := k[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '_':
		default:
			return false
		}
	}
	return true
}

// Retryable reports whether the operation that returned err may succeed if
// it is tried again unchanged: a transport failure (ErrTransport: a lost
// connection, an expired control deadline, a killed client), a condition
// that clears by itself (another restore holds the work tree's lock, a ref
// moved under a restore, rows busy, a host source that changed while it was
// read), or an error that says it is temporary (a method Temporary() bool
// that returns true, found anywhere in its chain: EINTR, EAGAIN, EMFILE, a
// network timeout). Nothing an agent or a hostile sandbox did is retryable:
// ErrProtocol, an *ExitError, a bad input, a limit, a conflict, a missing
// tool, a refused host key. The caller's own cancellation (context.Canceled
// or DeadlineExceeded without ErrTransport) is not retryable either, though
// DeadlineExceeded says it is temporary: the caller decided to stop.
//
// A full disk (ENOSPC, EDQUOT) is not retryable: it clears only when
// someone frees space, so a retry on a timer fails the same way until an
// operator acts; the error names the path, and the same call succeeds
// unchanged afterwards.
//
// An error that answers for itself (a method Retryable() bool anywhere in
// its chain; the first one errors.As finds) is believed before ErrTransport
// and ErrProtocol are looked for. Every error type and sentinel of this
// module answers correctly through this function; a Runner of its own may
// give its errors a Retryable method, or wrap ErrTransport.
//
// An errors.Join of independent failures is read as one chain, so one
// transport failure in it makes it retryable: a caller that joins an
// agent's lost connection with a restore's conflict should return the
// failure that decides what to do next (the conflict), not the join.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var r interface{ Retryable() bool }
	if errors.As(err, &r) {
		return r.Retryable()
	}
	if errors.Is(err, ErrProtocol) {
		return false
	}
	if errors.Is(err, ErrTransport) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var t interface{ Temporary() bool }
	if errors.As(err, &t) {
		return t.Temporary()
	}
	return false
}
