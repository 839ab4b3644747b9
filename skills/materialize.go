package skills

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/airlockdev/airlock/internal/digest"
	"github.com/airlockdev/airlock/internal/statedir"
	"github.com/airlockdev/airlock/internal/tree"
)

// Source is one selected skill.
type Source struct {
	Key  string // the host's stable key for the skill (registry id, slug…)
	Name string // the skill's directory name in the bundle: one path segment
	Dir  string // host directory holding SKILL.md
}

// Skill is a materialized skill.
type Skill struct {
	Key, Name string // from the Source
	// Description is SKILL.md's, in prompt form, at most MaxDescription
	// characters; a longer one is cut at a sentence or clause boundary and
	// ends in CutMarker (default mode; strict mode drops the skill).
	Description string
	// DescriptionCut reports that cut (nil: the description is whole). Each
	// cut is also logged at Warn on every Materialize call that returns it.
	DescriptionCut *Cut
	Digest         string   // "sha256:<hex>" of the copied tree's manifest
	Files          int      // regular files in the copied tree
	Bytes          int64    // total size in bytes of those files
	Skipped        []string // links and special files left out, relative paths (raw name bytes)
}

// Dropped is a selected skill left out of the bundle, with a human reason.
type Dropped struct {
	Key, Name, Reason string // Key, Name: from the Source; Reason: why the skill was left out
}

// Identity identifies a bundle's content: the skills the agent is told
// about and can read. It never holds a host path.
type Identity struct {
	// Digest is "sha256:<64 hex>" over a version tag and, for each skill
	// in Bundle.Skills (the skills that survived), sorted by Key then Name:
	// its Key, its Name and its tree digest (Skill.Digest: the path, type,
	// permission bits, size and SHA-256 of every directory and regular
	// file of its copy, SKILL.md included).
	//
	// Nothing else takes part. Not a dropped skill (Bundle.Dropped), of
	// which the agent is told nothing: dropping one, or changing one that
	// stays dropped, leaves the identity of the others, and a selection
	// whose every skill is dropped has the identity of an empty selection.
	// Not what a copy leaves out (Skill.Skipped: links and special files).
	// Not a host path (Source.Dir, the state directory, Bundle.Dir), the
	// order of the sources, or the root a prompt is rendered for.
	Digest string
}

// Bundle is the result of Materialize.
type Bundle struct {
	Dir      string    // <stateDir>/<id>; "" when no skill survived
	Skills   []Skill   // sorted by Name
	Dropped  []Dropped // selected skills left out, sorted by Name
	Identity Identity  // identifies the bundle's content
}

// Limits bound each skill's tree. A zero field takes the default of the
// host tree walker (100,000 files, 4 GiB in total, 1 GiB a file, depth 64,
// 4096-byte paths).
type Limits struct {
	MaxFiles     int   // files and directories in the tree; default 100,000
	MaxBytes     int64 // total bytes of the tree's files; default 4 GiB
	MaxFileBytes int64 // bytes of any one file; default 1 GiB
	MaxDepth     int   // directory nesting; default 64
	MaxPathLen   int   // bytes of a relative path; default 4096
}

// MaxSkillMD is the largest usable SKILL.md.
const MaxSkillMD = 1 << 20

// identityTag versions the identity encoding.
const identityTag = "airlock.skills.identity.v2"

var (
	// ErrInvalidSource reports a caller error in the selection: a bad Key
	// or Name, two sources with one Name, or a state directory that is a
	// filesystem root, inside a selected skill, or cannot be resolved.
	ErrInvalidSource = errors.New("invalid skill source")
	// ErrChanged reports a skill that changed while it was materialized.
	ErrChanged = tree.ErrChanged
	// ErrLimit is wrapped by every limit error; errors.As finds *LimitError.
	ErrLimit = tree.ErrLimit
)

// LimitError reports a skill whose tree exceeded one of [Limits]. It wraps
// [ErrLimit]; its message names the Limits field to raise.
type LimitError struct {
	Skill string // the Name of the skill whose tree crossed the limit
	// Limit names the limit: "files", "directories" (directories count
	// against MaxFiles too), "bytes", "file bytes", "depth" or
	// "path length".
	Limit string
	Max   int64  // the limit in force
	Path  string // the path, relative to the skill's directory, that crossed it
	err   error  // the walker's error, with the skill and its directory
}

// Error implements error: the walker's message, naming the skill, its
// directory and the limit crossed.
func (e *LimitError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error, which wraps ErrLimit.
func (e *LimitError) Unwrap() error { return e.err }

// Option configures Materialize.
type Option func(*options)

type options struct {
	log    *slog.Logger
	limits tree.Limits
	strict bool
	racy   time.Duration     // see racyWindow; tests shorten it
	copied func(name string) // tests: called for every skill copied
	// beforeIndex, for tests, is called right before an index entry is
	// written.
	beforeIndex func()
}

// WithLogger sends drop and spec warnings to l. Default: discard.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithLimits bounds each skill's tree. Default: the walker's defaults.
func WithLimits(l Limits) Option {
	return func(o *options) {
		o.limits = tree.Limits{MaxFiles: l.MaxFiles, MaxBytes: l.MaxBytes, MaxFileBytes: l.MaxFileBytes,
			MaxDepth: l.MaxDepth, MaxPathLen: l.MaxPathLen}
	}
}

// WithStrictSpec drops a skill whose frontmatter violates the Agent Skills
// spec, reads the frontmatter as YAML only (no [ParseMetaLenient]), and so
// never cuts a description (one over [MaxDescription] is a violation).
// Default: the violation is only logged. See the package documentation for
// the edge cases.
func WithStrictSpec() Option { return func(o *options) { o.strict = true } }

// Materialize copies the selected skills into an owned bundle under stateDir
// (created if missing) and returns it.
//
// An unchanged selection is recognized from metadata alone: Materialize
// fingerprints each source (paths, types, modes, sizes, inode numbers and
// times; no content) and, when an index entry left by an earlier call
// matches and its bundle exists, returns that bundle without reading or
// writing a byte of content. Otherwise it copies every usable skill into a
// fresh temporary directory in one pass that hashes as it copies, derives
// the identity from the copies, and publishes them with one rename — or, when
// an identical bundle already exists, discards the copies and reuses it.
//
// Caller errors (ErrInvalidSource) come back before anything is read or
// written. A skill that exceeds a limit or changes while it is copied fails
// the whole call (ErrLimit, ErrChanged): retrying is safe. An unusable skill
// is dropped, not an error.
func Materialize(ctx context.Context, stateDir string, sources []Source, opts ...Option) (*Bundle, error) {
	o := options{log: slog.New(slog.DiscardHandler), racy: racyWindow}
	for _, opt := range opts {
		opt(&o)
	}
	if !filepath.IsAbs(stateDir) {
		return nil, fmt.Errorf("%w: state directory %q is not an absolute host path; pass an absolute path (filepath.Abs)", ErrInvalidSource, stateDir)
	}
	if err := checkSources(sources); err != nil {
		return nil, err
	}
	if err := checkStateDir(stateDir, sources); err != nil {
		return nil, err
	}
	cutoff := time.Now().Add(-o.racy)
	before := fingerprint(ctx, sources, o, cutoff)
	b, ok := lookupIndex(stateDir, before)
	if !ok {
		var err error
		var asSeen bool
		if b, asSeen, err = build(ctx, stateDir, sources, before.passes, o); err != nil {
			return nil, err
		}
		// The entry is keyed by the metadata seen before the copy, and
		// every copy was checked against it (copyStill): a source that
		// changes after the copy gets new times (the racy window covers
		// timestamp granularity), so that key can never match it again. A
		// skill that changed during its copy was copied again as it then
		// was, which that key does not describe: no entry.
		// A selection of which no skill survived is indexed too: it would
		// otherwise be copied and hashed again on every call. Its entry
		// needs the state directory, which exists once anything was copied.
		if before.usable && asSeen {
			if o.beforeIndex != nil {
				o.beforeIndex()
			}
			storeIndex(ctx, stateDir, before, b)
		}
	}
	for _, d := range b.Dropped {
		o.log.Warn("skill dropped", "skill.key", d.Key, "skill.name", d.Name, "reason", d.Reason)
	}
	for _, s := range b.Skills {
		if c := s.DescriptionCut; c != nil {
			o.log.Warn("skill description cut to fit the prompt", "skill.key", s.Key, "skill.name", s.Name,
				"original", c.Original, "kept", c.Kept, "at", c.At, "limit", MaxDescription)
		}
	}
	return b, nil
}

// build copies every usable source into a temporary directory and
// publishes it as the bundle.
//
// Up to skillsAtOnce skills are copied at once (each by tree.Copy's own
// workers): a skill is small, and starting the next one while the last
// files of another are written keeps every core busy. The outcome is the
// one of copying them in order: logs come in source order, and of several
// failures the first source's is returned (a failure cancels only the
// copies of the sources after it).
//
// passes holds, by Name, what the fingerprint pass saw of each source: a
// copy takes its listing and lstat from there (tree.Seen), so that the
// tree is listed once, and the copy is checked against the very metadata
// its index entry is keyed by (copyStill). It may be nil.
//
// asSeen reports that every skill was copied as the fingerprint pass saw
// it (not copied again after a change).
func build(ctx context.Context, stateDir string, sources []Source, passes map[string]sourcePass, o options) (b *Bundle, asSeen bool, err error) {
	b, asSeen = &Bundle{}, true
	var tmp string
	unlock := func() {}
	defer func() {
		if tmp != "" {
			tree.RemoveAll(tmp)
		}
		unlock() // after the removal: a live writer's directory is never swept
	}()
	copies := make([]copyOutcome, len(sources))
	cancels := make([]context.CancelFunc, len(sources))
	var mu sync.Mutex // guards cancels
	failed := func(i int) {
		mu.Lock()
		defer mu.Unlock()
		for _, cancel := range cancels[i+1:] {
			if cancel != nil {
				cancel()
			}
		}
	}
	sem := make(chan struct{}, skillsAtOnce)
	var wg sync.WaitGroup
	var setupErr error
	for i, src := range sources {
		if setupErr = ctx.Err(); setupErr != nil {
			break
		}
		if copies[i].reason = dirReason(src.Dir); copies[i].reason != "" {
			continue
		}
		if tmp == "" {
			var done func()
			if tmp, done, setupErr = tempDir(stateDir); setupErr != nil {
				break
			}
			unlock = done
		}
		if o.copied != nil {
			o.copied(src.Name)
		}
		sem <- struct{}{}
		cctx, cancel := context.WithCancel(ctx)
		mu.Lock()
		cancels[i] = cancel
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			copies[i] = copySkill(cctx, src, filepath.Join(tmp, src.Name), passes[src.Name], o)
			if copies[i].err != nil {
				failed(i)
			}
		}()
	}
	wg.Wait()
	for _, cancel := range cancels {
		if cancel != nil {
			cancel()
		}
	}
	for i, src := range sources {
		c := copies[i]
		if c.err != nil {
			return nil, false, c.err
		}
		if setupErr != nil {
			continue // the errors of the copies started before it come first
		}
		asSeen = asSeen && !c.again
		if c.warn != "" {
			o.log.Warn("skill violates the Agent Skills spec", "skill.key", src.Key, "skill.name", src.Name, "reason", c.warn)
		}
		if c.reason != "" {
			b.Dropped = append(b.Dropped, Dropped{Key: src.Key, Name: src.Name, Reason: c.reason})
			continue
		}
		b.Skills = append(b.Skills, c.skill)
	}
	if setupErr != nil {
		return nil, false, setupErr
	}
	sort.Slice(b.Skills, func(i, j int) bool { return b.Skills[i].Name < b.Skills[j].Name })
	sort.Slice(b.Dropped, func(i, j int) bool { return b.Dropped[i].Name < b.Dropped[j].Name })
	b.Identity = identity(b.Skills)
	if len(b.Skills) == 0 {
		return b, asSeen, nil
	}
	dir, err := publish(ctx, stateDir, b.Identity, tmp)
	if err != nil {
		return nil, false, err
	}
	tmp = "" // published, or already gone
	b.Dir = dir
	return b, asSeen, nil
}

// skillsAtOnce bounds the skills build copies at the same time.
const skillsAtOnce = 2

// copyAttempts bounds the copies of a skill that keeps changing while it
// is copied.
const copyAttempts = 3

// copyStill copies src to dst and checks that the tree held still while it
// was copied (heldStill): no directory changed since the pass before the
// copy reached it. The copy's own checks
// see a file that changes while it is read, not one that moves between
// two directories while they are listed: that file would be in neither
// copy or in both. A tree that changed is copied again from a fresh pass,
// up to copyAttempts copies in all; then the error wraps ErrChanged.
//
// pass is what the fingerprint pass saw of src before the copy (its
// listing is taken, tree.Seen); without a listing, a fresh pass is made.
// again reports a copy not of the tree pass saw.
func copyStill(ctx context.Context, src Source, dst string, pass sourcePass, o options) (res *tree.Result, again bool, err error) {
	opts := tree.Options{Limits: o.limits}
	for attempt := 1; attempt <= copyAttempts; attempt++ {
		if attempt > 1 || pass.seen == nil {
			pass.md, pass.seen = tree.FingerprintSeen(ctx, src.Dir, opts, time.Now().Add(-o.racy), maxSeen)
			again = true
		}
		if res, err = tree.Copy(ctx, src.Dir, dst, tree.Options{Limits: o.limits, Seen: pass.seen}); err == nil {
			if err = heldStill(src.Dir, pass, res.Manifest, attempt); err == nil {
				return res, again, nil
			}
			if rerr := tree.RemoveAll(dst); rerr != nil {
				return nil, again, rerr
			}
		}
		if !errors.Is(err, tree.ErrChanged) || ctx.Err() != nil {
			return nil, again, err
		}
	}
	return nil, again, err
}

// heldStill checks a copy of the tree at dir, m, against before, what a
// metadata pass saw of the tree before the copy: no directory changed
// since the pass reached it (tree.Seen.Still; each file the copy checked
// itself against the pass's lstat), and the copy holds what the pass
// counted. A second metadata pass would not do: a file moving while it
// runs can be missed by it too, as by the first pass and the copy.
func heldStill(dir string, before sourcePass, m tree.Manifest, attempt int) error {
	if before.seen.Still(dir) && m.Files() == before.md.Files && m.Bytes() == before.md.Bytes {
		return nil
	}
	return fmt.Errorf("%w: files moved, or were added or removed, while the skill was copied (copy %d of at most %d; %d files, %d bytes copied of %d files, %d bytes listed); retry when it is quiet",
		tree.ErrChanged, attempt, copyAttempts, m.Files(), m.Bytes(), before.md.Files, before.md.Bytes)
}

// spaceAdvice says what to do about a full file system, or "".
func spaceAdvice(err error) string {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return "; free space (or inodes) on the state directory's file system and retry"
	}
	return ""
}

// copyOutcome is what copying one skill came to: a skill, or a reason to
// drop it, or an error; warn is a spec violation to log.
type copyOutcome struct {
	skill  Skill
	reason string
	warn   string
	err    error
	again  bool // copied again after a change: not as the fingerprint pass saw it
}

// dirReason says why a skill directory cannot be copied at all, or "".
func dirReason(dir string) string {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("skill directory %s does not exist", dir)
	case err != nil:
		return fmt.Sprintf("skill directory %s cannot be read: %v", dir, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Sprintf("skill directory %s is a symbolic link; select the real directory", dir)
	case !fi.IsDir():
		return fmt.Sprintf("skill directory %s is not a directory", dir)
	}
	return ""
}

// copySkill copies one skill to dst (copyStill), hashing as it copies, and
// checks the copy's SKILL.md. A non-empty reason drops the skill (and its
// copy). pass is what the fingerprint pass saw of src, if anything.
func copySkill(ctx context.Context, src Source, dst string, pass sourcePass, o options) copyOutcome {
	res, again, err := copyStill(ctx, src, dst, pass, o)
	if err != nil {
		err = fmt.Errorf("copying skill %q from %s into %s: %w%s", src.Name, src.Dir, filepath.Dir(filepath.Dir(dst)), err, spaceAdvice(err))
		if le := (*tree.LimitError)(nil); errors.As(err, &le) {
			return copyOutcome{err: &LimitError{Skill: src.Name, Limit: le.Limit, Max: le.Max, Path: le.Path, err: err}}
		}
		return copyOutcome{err: err}
	}
	drop := func(reason string) copyOutcome {
		return copyOutcome{reason: reason, err: tree.RemoveAll(dst), again: again}
	}
	out := copyOutcome{again: again}
	var md []byte
	e, ok := entry(res.Manifest, "SKILL.md")
	if ok && e.Type == tree.File && e.Size <= MaxSkillMD {
		// The copy is ours and holds no link: read SKILL.md from it.
		if md, err = os.ReadFile(filepath.Join(dst, "SKILL.md")); err != nil {
			return copyOutcome{err: err}
		}
	}
	if reason := usable(e, ok, res.Skipped, md, src); reason != "" {
		return drop(reason)
	}
	meta, notes, err := parseMeta(md, !o.strict)
	if err != nil {
		return drop(err.Error())
	}
	if warn := specWarning(meta, notes, src.Name); warn != "" {
		if o.strict {
			return drop(warn)
		}
		out.warn = warn
	}
	m := res.Manifest
	desc, cut := description(meta.Description)
	out.skill = Skill{Key: src.Key, Name: src.Name, Description: desc, DescriptionCut: cut,
		Digest: m.Digest(), Files: m.Files(), Bytes: m.Bytes(), Skipped: res.Skipped}
	return out
}

// specWarning says how a SKILL.md departs from the Agent Skills spec, or
// "": the violations Meta.Validate finds, after a missing frontmatter or
// values read leniently (ParseMetaLenient).
func specWarning(meta Meta, notes parseNotes, dirName string) string {
	var parts []string
	if notes.none {
		parts = append(parts, errNoFrontmatter.Error())
	}
	for _, k := range notes.lenient {
		parts = append(parts, fmt.Sprintf("%s: the value holds an unquoted \": \", which is not valid YAML; read as text to the end of the line (quote the value)", k))
	}
	if err := meta.Validate(dirName); err != nil {
		parts = append(parts, strings.TrimPrefix(err.Error(), ErrSpec.Error()+": "))
	}
	if len(parts) == 0 {
		return ""
	}
	return ErrSpec.Error() + ": " + strings.Join(parts, "; ")
}

func entry(m tree.Manifest, p string) (tree.Entry, bool) {
	i := sort.Search(len(m.Entries), func(i int) bool { return m.Entries[i].Path >= p })
	if i < len(m.Entries) && m.Entries[i].Path == p {
		return m.Entries[i], true
	}
	return tree.Entry{}, false
}

// checkStateDir refuses, by its real path (a missing one's: the real path
// it will have), a state directory that is a filesystem root or inside a
// selected skill's directory: every call would copy the earlier bundles
// into the next. It creates nothing; tempDir creates a missing one
// (statedir.Make).
func checkStateDir(stateDir string, sources []Source) error {
	state, err := statedir.Resolve(stateDir)
	if err != nil {
		return fmt.Errorf("%w: creating skills state directory %s: %w", ErrInvalidSource, stateDir, err)
	}
	if filepath.Dir(state) == state {
		return fmt.Errorf("%w: skills state directory %s is the filesystem root %s; pass a dedicated directory", ErrInvalidSource, stateDir, state)
	}
	for _, s := range sources {
		dir, err := filepath.EvalSymlinks(s.Dir)
		if err != nil {
			continue // not a directory to copy: dropped, with its reason
		}
		if state == dir || strings.HasPrefix(state, strings.TrimSuffix(dir, "/")+"/") {
			return fmt.Errorf("%w: the state directory %s (real path %s) is inside skill %q's directory %s: every call would copy the bundles into the next; keep the state directory outside every selected skill",
				ErrInvalidSource, stateDir, state, s.Name, s.Dir)
		}
	}
	return nil
}

// publish moves tmp to <stateDir>/<id> under the bundle's lock, or removes
// tmp when that bundle already exists, and returns the bundle's path.
func publish(ctx context.Context, stateDir string, id Identity, tmp string) (string, error) {
	final := bundleDir(stateDir, id)
	name := filepath.Base(final)
	unlock, err := lock(ctx, filepath.Join(stateDir, "."+name+".lock"))
	if err != nil {
		tree.RemoveAll(tmp)
		return "", err
	}
	defer unlock()
	if fi, err := os.Lstat(final); err == nil {
		tree.RemoveAll(tmp)
		if !fi.IsDir() {
			return "", fmt.Errorf("skills bundle %s exists and is not a directory; remove it", final)
		}
		return final, nil // an identical bundle: reused
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		tree.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		tree.RemoveAll(tmp)
		return "", fmt.Errorf("publishing skills bundle %s: %w", final, err)
	}
	return final, nil
}

func checkSources(sources []Source) error {
	names := make(map[string]bool, len(sources))
	for i, s := range sources {
		if err := checkName(s.Name); err != nil {
			return fmt.Errorf("%w: source %d (key %q): name %q %v; use one path segment such as the skill's directory name", ErrInvalidSource, i, s.Key, s.Name, err)
		}
		if strings.TrimSpace(s.Key) == "" || !utf8.ValidString(s.Key) || strings.ContainsFunc(s.Key, isControl) {
			return fmt.Errorf("%w: source %d (name %q): key %q must be non-blank UTF-8 without control characters", ErrInvalidSource, i, s.Name, s.Key)
		}
		if names[s.Name] {
			return fmt.Errorf("%w: two sources are named %q; each skill needs its own name in the bundle", ErrInvalidSource, s.Name)
		}
		if !filepath.IsAbs(s.Dir) {
			// As stage.Stage refuses a relative Source: a path relative to
			// the process's working directory is a bug waiting for a chdir.
			return fmt.Errorf("%w: source %q: directory %q is not an absolute host path; pass an absolute path (filepath.Abs)", ErrInvalidSource, s.Name, s.Dir)
		}
		names[s.Name] = true
	}
	return nil
}

// isControl reports runes that must not reach a prompt line: control and
// format characters (bidirectional overrides among them) and line or
// paragraph separators.
func isControl(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return errors.New(`is empty, "." or ".."`)
	case len(name) > 255:
		return errors.New("is longer than 255 bytes")
	case strings.HasPrefix(name, "."):
		return errors.New("starts with a dot")
	case strings.ContainsAny(name, `/\`):
		return errors.New("holds a path separator")
	case !utf8.ValidString(name) || strings.ContainsFunc(name, isControl):
		return errors.New("is not printable UTF-8")
	}
	return nil
}

// usable says why SKILL.md cannot be used, or "": e is its manifest entry
// (listed says there is one), skipped the copy's Skipped, md its content.
func usable(e tree.Entry, listed bool, skipped []string, md []byte, src Source) string {
	if listed {
		switch {
		case e.Type != tree.File:
			return "SKILL.md is a directory, not a regular file"
		case e.Size == 0:
			return "SKILL.md is empty"
		case e.Size > MaxSkillMD:
			return fmt.Sprintf("SKILL.md is %d bytes; the limit is %d", e.Size, MaxSkillMD)
		case !utf8.Valid(md):
			return "SKILL.md is not valid UTF-8"
		}
		return ""
	}
	for _, s := range skipped {
		if s == "SKILL.md" {
			if fi, err := os.Lstat(filepath.Join(src.Dir, "SKILL.md")); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				return "SKILL.md is a symbolic link; links are never followed"
			}
			return "SKILL.md is not a regular file"
		}
	}
	return "SKILL.md is missing"
}

// bundleDir is the bundle directory of identity id: <stateDir>/<first 32
// hex digits of the digest>.
func bundleDir(stateDir string, id Identity) string {
	return filepath.Join(stateDir, strings.TrimPrefix(id.Digest, digest.Prefix)[:32])
}

// identity digests the sorted (Key, Name, tree digest) rows of skills, each
// value one field of digest.Encode, so that it is injective over their
// bytes.
func identity(skills []Skill) Identity {
	rows := make([][3]string, len(skills))
	for i, s := range skills {
		rows[i] = [3]string{s.Key, s.Name, s.Digest}
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		return a[1] < b[1]
	})
	fields := make([]string, 0, 3*len(rows))
	for _, r := range rows {
		fields = append(fields, r[:]...)
	}
	return Identity{Digest: digest.Of(digest.Encode(identityTag, fields...))}
}

// Prompt renders the skills block of an agent prompt for the skill root the
// agent will see (a sandbox path, or Dir for a local run). It returns "" when
// no skill survived.
//
// The block is a contract with the agent, and its format is stable:
//
//	The following skills were materialized for this run.
//	Skill root: <root>
//	Selected skills: <name>, <name>, …
//	- <name>: <description> (file: <root>/<name>/SKILL.md)
//	…
//	Read a skill's SKILL.md from the skill root when the task calls for it.
//
// one "- " line per surviving skill, in Name order (": <description>" is
// left out when the description is empty). Render it for the sandbox by
// passing the in-sandbox path of the staged bundle (stage.Runtime.Path), not
// by rewriting a host rendering.
//
// Text a skill author controls (each skill's Name and Description) cannot
// reorder or hide what the agent reads: every format character (Unicode
// category Cf: bidirectional embeddings, overrides and isolates such as
// U+202E and U+2066–U+2069, zero-width characters such as U+200B, the BOM,
// tag characters) is dropped, every other control character (C0, DEL, C1)
// and line or paragraph separator becomes a space, and white space is
// collapsed, so each skill stays on its one line. The only control
// characters in the result are the line feeds Prompt writes itself, given
// a root that holds none: root is the caller's and is written as given
// (stage.Stage refuses a root holding a control, line-separator or format
// character, so stage.Runtime.Path's is plain).
func (b *Bundle) Prompt(root string) string {
	if b == nil || len(b.Skills) == 0 {
		return ""
	}
	if len(root) > 1 {
		root = strings.TrimRight(root, "/")
	}
	names := make([]string, len(b.Skills))
	for i, s := range b.Skills {
		names[i] = promptText(s.Name)
	}
	var sb strings.Builder
	sb.WriteString("The following skills were materialized for this run.\n")
	fmt.Fprintf(&sb, "Skill root: %s\n", root)
	fmt.Fprintf(&sb, "Selected skills: %s\n", strings.Join(names, ", "))
	for i, s := range b.Skills {
		fmt.Fprintf(&sb, "- %s", names[i])
		if d := promptText(s.Description); d != "" {
			fmt.Fprintf(&sb, ": %s", d)
		}
		fmt.Fprintf(&sb, " (file: %s)\n", joinRoot(root, names[i], "SKILL.md"))
	}
	sb.WriteString("Read a skill's SKILL.md from the skill root when the task calls for it.\n")
	return sb.String()
}

func joinRoot(root string, parts ...string) string {
	if root == "/" {
		return "/" + strings.Join(parts, "/")
	}
	return root + "/" + strings.Join(parts, "/")
}
