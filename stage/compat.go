package stage

import (
	"context"
	"os"
	"time"

	"github.com/airlockdev/airlock/sandbox"
)

// The sandbox vocabulary moved to package sandbox, which every package of
// this module shares. The names below are kept for one release so that
// existing callers compile; use package sandbox's.

// Runner runs commands in a sandbox.
//
// Deprecated: use sandbox.Runner.
type Runner = sandbox.Runner

// Command is one POSIX sh script to run in the sandbox.
//
// Deprecated: use sandbox.Command.
type Command = sandbox.Command

// ExitError reports a sandbox command that ran and failed.
//
// Deprecated: use sandbox.ExitError.
type ExitError = sandbox.ExitError

// FileReader is an optional capability of a Runner.
//
// Deprecated: use sandbox.FileReader.
type FileReader = sandbox.FileReader

// ControlTimeouter is an optional capability of a Runner.
//
// Deprecated: use sandbox.ControlTimeouter.
type ControlTimeouter = sandbox.ControlTimeouter

// Progress reports a stage's advance.
//
// Deprecated: use sandbox.Progress.
type Progress = sandbox.Progress

// Watched is a command that Watch runs.
//
// Deprecated: use sandbox.Watched.
type Watched = sandbox.Watched

// WatchOptions configures Watch.
//
// Deprecated: use sandbox.WatchOptions.
type WatchOptions = sandbox.WatchOptions

// RuntimeDir is the name reserved for airlock's own files.
//
// Deprecated: use sandbox.RuntimeDir.
const RuntimeDir = sandbox.RuntimeDir

// MaxControlTimeout caps the deadline of every control operation.
//
// Deprecated: use sandbox.MaxControlTimeout.
const MaxControlTimeout = sandbox.MaxControlTimeout

// The bounds of Command.Env.
//
// Deprecated: use sandbox.MaxEnvEntryBytes and sandbox.MaxEnvBytes.
const (
	MaxEnvEntryBytes = sandbox.MaxEnvEntryBytes
	MaxEnvBytes      = sandbox.MaxEnvBytes
)

// CheckEnv reports the first problem with env.
//
// Deprecated: use sandbox.CheckEnv.
func CheckEnv(env map[string]string) error { return sandbox.CheckEnv(env) }

// ControlDeadline returns the deadline of one control step through r.
//
// Deprecated: use sandbox.ControlDeadline.
func ControlDeadline(r Runner) time.Duration { return sandbox.ControlDeadline(r) }

// Watch runs cmd through r, bounding the wait for its end once armed.
//
// Deprecated: use sandbox.Watch.
func Watch(ctx context.Context, r Runner, cmd Command, o WatchOptions) *Watched {
	return sandbox.Watch(ctx, r, cmd, o)
}

// LocalRunner returns a Runner that runs each script with /bin/sh on this
// machine, in dir, with this process's whole environment (as it always
// did).
//
// Deprecated: use sandbox.Local, whose child gets a minimal environment
// unless sandbox.WithEnviron says otherwise.
func LocalRunner(dir string) Runner {
	return sandbox.Local(dir, sandbox.WithEnviron(os.Environ()))
}
