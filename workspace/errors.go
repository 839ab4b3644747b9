package workspace

import (
	"errors"
	"fmt"
	"strings"

	"github.com/airlockdev/airlock/internal/sentinel"
	"github.com/airlockdev/airlock/internal/shell"
)

// Sentinel errors. Every error a caller may branch on wraps one of them
// (test with [errors.Is]). sandbox.Retryable answers true for ErrLocked and
// ErrRace (another process holds what the restore needs, for a while) and
// for a transport failure (sandbox.ErrTransport); for everything else here
// it answers false: a bad spec, a missing tool, a hostile sandbox, a limit,
// a conflict, a missing or malformed round, an unusable repository, and a
// full disk on the host (ENOSPC, EDQUOT) — that one clears only when
// someone frees space, and the error says where.
var (
	// ErrSpec reports an unusable Spec or option: a relative or unclean
	// path, a missing Runner, a bad exclude pattern. Nothing was changed.
	ErrSpec = errors.New("invalid workspace spec")
	// ErrTool reports a missing or too old tool on the host or in the
	// sandbox. It is a *ToolError; nothing was changed.
	ErrTool = errors.New("required tool missing or too old")
	// ErrHostile reports sandbox output that breaks the protocol: a
	// malformed status line, a bundle that does not verify or fails fsck
	// (a tree entry named "..", ".git" or holding a slash), a bundle whose
	// refs are not exactly the one asked for. The whole restore failed
	// closed: nothing of it was written locally. errors.Is matches it to
	// sandbox.ErrProtocol too, the class every package gives a sandbox
	// that broke the protocol; a transport failure is never ErrHostile.
	ErrHostile = shell.ProtocolSentinel("sandbox sent invalid data")
	// ErrTooLarge reports sandbox data larger than WithMaxBytes: a git
	// sandbox's bundle (nothing of it was integrated) or a plain
	// sandbox's files (the host stopped reading at the file past the
	// limit: nothing was deleted, nothing after it arrived). The host's
	// stop is the reason, whatever the sandbox command then died of.
	ErrTooLarge = errors.New("sandbox data exceeds the byte limit")
	// ErrConflict reports diverged histories whose merge has conflicts (a
	// *ConflictError), or the sandbox's commits sharing no history with
	// the local HEAD (its branch was replaced since Prepare); local refs
	// and files are unchanged.
	ErrConflict = errors.New("merge conflict")
	// ErrLocked reports a restore that waited too long for another restore
	// of the same work tree, or a Prepare or Restore whose script waited
	// too long in the sandbox for another prepare or restore of the same
	// sandbox work tree that still runs there (one whose host gave up on
	// it). Retryable
	// (sandbox.Retryable): the other ends, and the same call then takes
	// the lock.
	ErrLocked = sentinel.Temporary("work tree lock held")
	// ErrRace reports a local ref that kept moving while a restore tried to
	// install its result (compare-and-swap retries exhausted), or a lock
	// on the local index that stayed while the restore waited to stage
	// what the agent staged. The sandbox's files were already merged;
	// restore again to install the commits and the staged entries.
	// Retryable (sandbox.Retryable): the git that moved the ref or holds
	// the index ends. A lock a killed git left stays until it is removed,
	// so a caller bounds its retries; the error names the lock file.
	ErrRace = sentinel.Temporary("local ref changed during restore")
	// ErrNoRound reports a Reopen of an id whose state is not there.
	ErrNoRound = errors.New("no such workspace round")
	// ErrBadState reports a round state file that does not decode strictly.
	ErrBadState = errors.New("malformed workspace round state")
	// ErrRepo reports a host git work tree in a state Prepare cannot ship:
	// unmerged index entries, a bare repository, a work tree whose top is
	// not Spec.Local, a shallow clone; or one a Restore must not write into: a rebase,
	// bisect, cherry-pick, revert or merge stopped half-way (end it, then
	// restore again).
	ErrRepo = errors.New("unusable local repository")
)

// ToolError names a tool that is missing or too old.
type ToolError struct {
	Tool  string // "git", "tar", "find", "sh"
	Where string // "host" or "sandbox"
	Have  string // the version found, "" when missing
	Need  string // the minimum version, "" when any will do
}

// Error implements error: which tool is missing or too old, where, and
// what to install.
func (e *ToolError) Error() string {
	if e.Have == "" {
		return fmt.Sprintf("workspace: %s is missing on the %s; install %s%s", e.Tool, e.Where, e.Tool, need(e.Need))
	}
	return fmt.Sprintf("workspace: %s on the %s is %s; install %s%s", e.Tool, e.Where, e.Have, e.Tool, need(e.Need))
}

func need(v string) string {
	if v == "" {
		return ""
	}
	return " " + v + " or later"
}

// Is matches ErrTool.
func (e *ToolError) Is(target error) bool { return target == ErrTool }

// ConflictError lists the paths a merge of diverged histories could not
// resolve.
type ConflictError struct {
	Paths []string // conflicting paths relative to the work tree, as git reports them
	Base  string   // the commit the round was prepared on ("" for an unborn HEAD)
}

// Error implements error: the conflicting paths and how to resolve them.
func (e *ConflictError) Error() string {
	msg := "workspace: merging the sandbox's commits conflicts in " + strings.Join(e.Paths, ", ") +
		"; nothing was changed locally, and the sandbox still holds its commits"
	if e.Base == "" {
		return msg + ": move the local commits aside (git branch mine), restore again, then merge them (git merge mine)"
	}
	return msg + ": move the local commits made since " + e.Base + " aside (git branch mine && git reset --keep " + e.Base +
		"), restore again, then merge them (git merge mine) and resolve the conflicts there"
}

// Is matches ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }
