package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/airlockdev/airlock/internal/gitexec"
	"github.com/airlockdev/airlock/internal/tree"
	"github.com/airlockdev/airlock/sandbox"
)

// Spec names the two sides of a round.
type Spec struct {
	Local  string         // host work tree (git work tree or plain directory), absolute
	Remote string         // absolute directory in the sandbox; Prepare clears it, so in a sandbox that shares the host's file system it may be neither Local, nor above it, nor inside it (ErrSpec)
	Runner sandbox.Runner // runs every sandbox command
	// Exclude lists slash patterns never synced either way (a matching
	// directory with all below it); sandbox.RuntimeDir always is. Both
	// kinds of round read them as git's glob pathspecs do: anchored at
	// the top of the work tree; *, ? and [...] (with [!...], ranges and
	// the POSIX [:classes:]) within one component and on bytes, so ? is
	// one byte of a UTF-8 name; a whole component ** for any number of
	// them ("**/*.env" at every depth, "*.env" at the top only, "a/**" all
	// below a); a pattern equal to a path matches it. A pattern that is
	// not a clean relative path ("./x", "dir/"), holds ** inside a
	// component or is not a well-formed glob is refused (ErrSpec). A
	// pattern may name a symbolic link (the link is left out); nothing
	// below a link travels anyway, so a pattern below one matches nothing.
	Exclude []string
}

// Result reports what a Restore brought back.
type Result struct {
	GitBacked bool   // Spec.Local is a git work tree (false for plain directories)
	Head      string // local HEAD after restore ("" for plain directories)
	// Branch is the ref the sandbox's commits moved (refs/heads/…): the
	// branch checked out when Restore ran, which is not the one Prepare
	// saw when the user switched branches during the round (a warning
	// is logged then). "" when they moved a detached HEAD, or nothing
	// moved.
	Branch  string
	Commits int  // commits brought back
	Merged  bool // a merge commit was needed
	// Relative slash paths, sorted. Kept: local edits (of a file, or of
	// an index entry) that beat a remote change or deletion, and nothing
	// else. Refused: every sandbox entry
	// that did not arrive for another reason (hostile or over-limit
	// entries, links that would not resolve inside the work tree, changes
	// of type that could not apply whole and the deletions below them,
	// entries below a local edit that was kept, a runtime directory that
	// is not a directory), and setuid, setgid or sticky files (written
	// without those bits, so also in Updated when they changed). Refused
	// also names, as the sandbox wrote them, the refs of a bundle that
	// were not asked for and the refused paths (or "commit <id>") of
	// sandbox commits that were not integrated, and "ref HEAD" when the
	// sandbox's HEAD names no commit in a round prepared on one (the
	// work tree arrived; no commit could). An adapter may alert on
	// Refused: nothing a well-behaved run leaves there.
	Updated, Deleted, Kept, Refused []string
	// Runtime lists the entries at the top of the sandbox's
	// sandbox.RuntimeDir (".airlock/skills" for skills staged there, and
	// the stage's files beside it, ".airlock/.airlock-manifest-skills.json"
	// and ".airlock/.airlock-stamps-skills"; not a plain round's own mark
	// nor the work tree's lock, ".airlock/.workspace-prepare" and its
	// ".pid"),
	// relative slash paths, sorted. They never come back, by design: they
	// are the host's own staged assets and state, not the agent's work, so
	// they are neither in Refused nor in Reasons. A git round's runtime
	// directory that is not a directory (a link, a file) is not listed
	// here: ".airlock" is then in Refused (a plain round's Restore fails:
	// its mark went with it).
	Runtime []string
	// Reasons says why each path in Refused was refused (the first reason
	// when there were several).
	Reasons map[string]string
	// StagedDropped says why nothing of what the agent staged came back,
	// when that is so: the sandbox's index could not be written as a tree
	// (unmerged entries, a path that is both a file and a directory, an
	// object it names is missing), so nothing is known of it. The work
	// tree and the commits came back all the same; no entry of the
	// sandbox's index reached the local index. "" when the staged state came back (or there was none to
	// bring), and always for plain directories. An adapter may alert on
	// it as on Refused.
	StagedDropped string
	// Rewritten lists the sandbox commits that were rewritten before they
	// were integrated, oldest first: those that held a path under
	// sandbox.RuntimeDir or matching Spec.Exclude (those paths dropped),
	// and every commit above one of them (new parents). Old is the
	// sandbox's id, which never enters the local repository; New is the
	// id in the local history.
	Rewritten []Rewrite
}

// Rewrite is a sandbox commit that Restore rewrote before integrating it:
// Old is the sandbox's commit id, New the id of the commit that took its
// place in the local repository.
type Rewrite struct{ Old, New string }

// Option configures Prepare and Reopen.
type Option func(*options)

type options struct {
	log         *slog.Logger
	progress    func(sandbox.Progress)
	name, email string
	stateDir    string
	maxBytes    int64
	lockWait    time.Duration
	casRetries  int
	beforeCAS   func(attempt int)     // tests: runs before each compare-and-swap of the local ref
	beforePlace func(tmp, rel string) // tests: runs before a temporary file or link is renamed over rel
	prepareWait int                   // tests: seconds a prepare script waits for another (0: shell.PrepareLockWait)
}

// Defaults.
const (
	DefaultMaxBytes  = 4 << 30 // bytes a restore may bring back from the sandbox (4 GiB); see WithMaxBytes
	defaultName      = "airlock"
	defaultEmail     = "airlock@localhost"
	defaultLockWait  = 2 * time.Minute
	defaultCASTries  = 5
	minHostGitMajor  = 2
	minHostGitMinor  = 38
	minGuestGitMajor = 2
	minGuestGitMinor = 20
)

// WithLogger sends log records to l. Default: discarded.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithProgress calls fn as a Prepare or Restore advances; Asset is
// "prepare" or "restore", and every count only grows. Default: none.
func WithProgress(fn func(sandbox.Progress)) Option {
	return func(o *options) { o.progress = fn }
}

// WithCommitter sets the author and committer of the commits airlock
// writes (snapshots, merge commits). Default: airlock <airlock@localhost>.
func WithCommitter(name, email string) Option {
	return func(o *options) { o.name, o.email = name, email }
}

// WithStateDir keeps round state (the baseline) in dir, created 0700 when
// missing. Default: <git dir>/airlock/rounds for a git work tree; for a
// plain directory, memory only, so Reopen needs this option.
func WithStateDir(dir string) Option {
	return func(o *options) { o.stateDir = dir }
}

// WithMaxBytes makes Restore refuse more than n bytes from the sandbox.
// Default: DefaultMaxBytes (4 GiB); n <= 0 keeps the default.
func WithMaxBytes(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.maxBytes = n
		}
	}
}

func newOptions(opts []Option) options {
	o := options{log: slog.New(slog.DiscardHandler), name: defaultName, email: defaultEmail,
		maxBytes: DefaultMaxBytes, lockWait: defaultLockWait, casRetries: defaultCASTries}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func (o *options) report(p sandbox.Progress) {
	if o.progress != nil {
		o.progress(p)
	}
}

// Round is one prepared sandbox copy, restorable once the run is over.
type Round struct {
	spec   Spec
	o      options
	rec    record
	base   tree.Manifest // plain directories: what the sandbox was given
	git    *gitexec.Git  // git work trees
	gitDir string        // absolute git dir of a git work tree
	state  string        // state directory ("" when kept in memory)
	// unsaved: a Restore moved the baseline in memory but could not save
	// it (rebase.go); the next Restore saves it.
	unsaved bool
}

// ID returns the round's id: 24 lowercase hex digits, stable across Reopen.
func (r *Round) ID() string { return r.rec.ID }

// Prepare gives the sandbox a copy of spec.Local at spec.Remote and
// returns the round that restores it. See the package documentation.
func Prepare(ctx context.Context, spec Spec, opts ...Option) (*Round, error) {
	o := newOptions(opts)
	if err := checkSpec(spec, o); err != nil {
		return nil, err
	}
	id, err := newID()
	if err != nil {
		return nil, err
	}
	r := &Round{spec: spec, o: o, rec: record{Schema: recordSchema, ID: id, Local: spec.Local, Remote: spec.Remote, Exclude: slices.Clone(spec.Exclude)}}
	if r.rec.Exclude == nil {
		r.rec.Exclude = []string{}
	}
	g, gitDir, err := openRepo(ctx, spec.Local)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if g != nil {
		r.git, r.gitDir = g, gitDir
		r.rec.Kind = kindGit
		r.state = o.stateDir
		if r.state == "" {
			r.state = filepath.Join(gitDir, "airlock", "rounds")
		}
		r.sweepTmp(false)
		err = r.prepareGit(ctx, gitDir)
	} else {
		r.rec.Kind = kindPlain
		r.state = o.stateDir
		r.sweepTmp(false)
		err = r.preparePlain(ctx)
	}
	if err != nil {
		if hostFailure(err) && ctx.Err() == nil {
			// A host-side write failed (a full disk, ...): the user's work
			// tree, index and refs are as they were, and nothing of the
			// round is left.
			return nil, fmt.Errorf("%w; nothing of %s changed: free space where the error says (or fix what it names) and run Prepare again", err, spec.Local)
		}
		return nil, err
	}
	o.log.LogAttrs(ctx, slog.LevelInfo, "workspace prepared", slog.String("round", id), slog.String("kind", r.rec.Kind), slog.Duration("elapsed", time.Since(start)))
	return r, nil
}

// Reopen returns the round id prepared earlier (possibly by another
// process) for spec, from its saved state. A plain directory's round can be
// reopened only when it was prepared WithStateDir, and the same option must
// be given here.
func Reopen(ctx context.Context, spec Spec, id string, opts ...Option) (*Round, error) {
	o := newOptions(opts)
	if err := checkSpec(spec, o); err != nil {
		return nil, err
	}
	if !validID(id) {
		return nil, fmt.Errorf("%w: round id %q is not 24 lowercase hex digits; pass Round.ID()", ErrNoRound, id)
	}
	g, gitDir, err := openRepo(ctx, spec.Local)
	if err != nil {
		return nil, err
	}
	r := &Round{spec: spec, o: o, git: g, gitDir: gitDir, state: o.stateDir}
	if r.state == "" {
		if g == nil {
			return nil, fmt.Errorf("%w: %s is a plain directory: its rounds are kept only WithStateDir; pass the state directory the round was prepared with", ErrSpec, spec.Local)
		}
		r.state = filepath.Join(gitDir, "airlock", "rounds")
	}
	rec, base, err := loadState(r.state, id)
	if err != nil {
		return nil, err
	}
	switch {
	case rec.Local != spec.Local || rec.Remote != spec.Remote:
		return nil, fmt.Errorf("%w: round %s was prepared for %s -> %s, not %s -> %s", ErrSpec, id, rec.Local, rec.Remote, spec.Local, spec.Remote)
	case (rec.Kind == kindGit) != (g != nil):
		return nil, fmt.Errorf("%w: round %s is a %s round but %s is no longer one", ErrRepo, id, rec.Kind, spec.Local)
	}
	r.rec, r.base = rec, base
	return r, nil
}

// Restore brings the sandbox's commits and file changes back into the
// local work tree. See the package documentation for the merge rules.
func (r *Round) Restore(ctx context.Context) (*Result, error) {
	unlock, err := lockWorkTree(ctx, r.lockPath(), r.o.lockWait)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r.sweepTmp(true)
	start := time.Now()
	var res *Result
	if r.rec.Kind == kindGit {
		res, err = r.restoreGit(ctx)
	} else {
		res, err = r.restorePlain(ctx)
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) && !strings.Contains(err.Error(), "run Restore again") {
		// Stopped between two steps that say nothing of it: say it.
		return nil, fmt.Errorf("workspace: Restore of %s stopped: %w; nothing is lost (what was written stays consistent, the sandbox still holds the rest): run Restore again", r.spec.Local, err)
	}
	if err != nil {
		return nil, err
	}
	for _, l := range [][]string{res.Updated, res.Deleted, res.Kept, res.Refused, res.Runtime} {
		slices.Sort(l)
	}
	res.Updated = slices.Compact(res.Updated)
	res.Deleted = slices.Compact(res.Deleted)
	res.Kept = slices.Compact(res.Kept)
	res.Refused = slices.Compact(res.Refused)
	res.Runtime = slices.Compact(res.Runtime)
	r.o.log.LogAttrs(ctx, slog.LevelInfo, "workspace restored", slog.String("round", r.rec.ID),
		slog.Int("commits", res.Commits), slog.Int("updated", len(res.Updated)), slog.Int("deleted", len(res.Deleted)),
		slog.Int("kept", len(res.Kept)), slog.Int("refused", len(res.Refused)), slog.Duration("elapsed", time.Since(start)))
	return res, nil
}

func (r *Round) lockPath() string {
	if r.rec.Kind == kindGit {
		return filepath.Join(r.gitDir, "airlock", "restore.lock")
	}
	return filepath.Join(r.spec.Local, sandbox.RuntimeDir, "restore.lock")
}

func checkSpec(spec Spec, o options) error {
	switch {
	case spec.Runner == nil:
		return fmt.Errorf("%w: Spec.Runner is nil; pass sandbox.Local(dir) or another Runner", ErrSpec)
	case !filepath.IsAbs(spec.Local) || filepath.Clean(spec.Local) != spec.Local || spec.Local == "/":
		return fmt.Errorf("%w: Spec.Local %q must be an absolute, clean path below /", ErrSpec, spec.Local)
	case !path.IsAbs(spec.Remote) || path.Clean(spec.Remote) != spec.Remote || spec.Remote == "/" || strings.ContainsAny(spec.Remote, "\x00\n"):
		return fmt.Errorf("%w: Spec.Remote %q must be an absolute, clean sandbox path below / without newlines", ErrSpec, spec.Remote)
	case o.stateDir != "" && (!filepath.IsAbs(o.stateDir) || filepath.Clean(o.stateDir) != o.stateDir):
		return fmt.Errorf("%w: WithStateDir %q must be an absolute, clean path", ErrSpec, o.stateDir)
	case strings.ContainsAny(o.name+o.email, "<>\n\x00") || o.name == "" || o.email == "":
		return fmt.Errorf("%w: WithCommitter(%q, %q): name and email must be non-empty without <, >, newline or NUL", ErrSpec, o.name, o.email)
	}
	for _, p := range spec.Exclude {
		if why := badExclude(p); why != "" {
			return fmt.Errorf("%w: exclude pattern %q %s", ErrSpec, p, why)
		}
	}
	return nil
}

// badExclude says what is wrong with a Spec.Exclude pattern, or "".
func badExclude(p string) string {
	switch {
	case p == "" || strings.ContainsAny(p, "\x00\n"):
		return "is empty or holds a NUL or a newline"
	case path.Clean(p) != p || path.IsAbs(p) || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return "is not a clean relative slash path (no leading / or ./, no trailing /, no . or .. component): write it as the path from the top of the work tree"
	}
	for _, c := range strings.Split(p, "/") {
		if strings.Contains(c, "**") && strings.Trim(c, "*") != "" {
			return "has ** inside a path component: write ** as a whole component (**/x.env, a/**/b, a/**) or * for one component"
		}
		if !wellFormed(c) {
			return "is not a valid glob (an unterminated [ class, a trailing \\ or an unknown [:class:])"
		}
	}
	return ""
}

func newID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("workspace: generating a round id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func validID(id string) bool {
	if len(id) != 24 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// excluded reports whether rel (or a directory above it) matches one of
// the patterns (matchGlob), or lies in the runtime directory.
func excluded(pats []string, rel string) bool {
	for p := rel; p != "." && p != ""; p = path.Dir(p) {
		if path.Dir(p) == "." && foldName(p) == sandbox.RuntimeDir {
			return true
		}
		for _, pat := range pats {
			if matchGlob(pat, p) {
				return true
			}
		}
	}
	return false
}

// reserved reports a path the sandbox may never write: one with a .git
// component anywhere, or below the runtime directory, as a case-folding
// file system (HFS+, APFS, NTFS) may read the name.
func reserved(rel string) bool { return whyReserved(rel) != "" }

// whyReserved says why the sandbox may not write rel, which of the two
// reserved places it is under, or "" when it is under neither.
// A backslash separates components too, as NTFS reads one.
func whyReserved(rel string) string {
	cs := strings.FieldsFunc(rel, func(r rune) bool { return r == '/' || r == '\\' })
	if len(cs) > 0 && (foldName(cs[0]) == sandbox.RuntimeDir || foldName(cs[0]) == runtimeShortName) {
		return "under the runtime directory " + sandbox.RuntimeDir + " (in a spelling some file system reads as it), whose entries never come back: the host's staged assets, not the agent's work"
	}
	for _, c := range cs {
		if isDotGit(c) {
			return "a .git component (in a spelling some file system reads as .git): git's own files are never written from the sandbox"
		}
	}
	return ""
}

// runtimeShortName is the 8.3 short name NTFS gives sandbox.RuntimeDir.
const runtimeShortName = "airloc~1"

// isDotGit reports a path component that some file system reads as .git:
// in any case, with code points HFS+ ignores, with trailing dots or spaces
// or an alternate data stream (NTFS), or as its 8.3 short name git~1 —
// the names git's fsck refuses in a tree.
func isDotGit(c string) bool {
	f := foldName(c)
	return f == ".git" || f == "git~1"
}

// foldName is c as a case-insensitive file system may see it: lower case,
// without the code points HFS+ ignores, without trailing dots and spaces
// and without an NTFS stream suffix (":…").
func foldName(c string) string {
	c = strings.Map(func(r rune) rune {
		switch {
		case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
			return -1
		}
		return r
	}, c)
	c, _, _ = strings.Cut(c, ":")
	return strings.ToLower(strings.TrimRight(c, ". "))
}

var errStop = errors.New("stop")
