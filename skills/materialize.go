package skills

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

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
	Key, Name, Description string
	Digest                 string // "sha256:<hex>" of the copied tree's manifest
	Files                  int
	Bytes                  int64
	Skipped                []string // links and special files left out, relative paths
}

// Dropped is a selected skill left out of the bundle, with a human reason.
type Dropped struct{ Key, Name, Reason string }

// Identity identifies a bundle's content. It never holds a host path.
type Identity struct{ Digest string }

// Bundle is the result of Materialize.
type Bundle struct {
	Dir      string  // <stateDir>/<id>; "" when no skill survived
	Skills   []Skill // sorted by Name
	Dropped  []Dropped
	Identity Identity
}

// Limits bound each skill's tree. A zero field takes the default of the
// host tree walker (100,000 files, 4 GiB in total, 1 GiB a file, depth 64,
// 4096-byte paths).
type Limits struct {
	MaxFiles     int
	MaxBytes     int64
	MaxFileBytes int64
	MaxDepth     int
	MaxPathLen   int
}

// MaxSkillMD is the largest usable SKILL.md.
const MaxSkillMD = 1 << 20

// identityTag versions the identity encoding.
const identityTag = "airlock.skills.identity.v1"

var (
	// ErrInvalidSource reports a caller error in the selection: a bad Key
	// or Name, or two sources with one Name.
	ErrInvalidSource = errors.New("invalid skill source")
	// ErrChanged reports a skill that changed while it was materialized.
	ErrChanged = tree.ErrChanged
	// ErrLimit is wrapped by every limit error; errors.As finds *LimitError.
	ErrLimit = tree.ErrLimit
)

// LimitError names the limit a skill exceeded and the path that crossed it.
type LimitError = tree.LimitError

// Option configures Materialize.
type Option func(*options)

type options struct {
	log    *slog.Logger
	limits tree.Limits
	strict bool
}

// WithLogger sends drop and spec warnings to l. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithLimits bounds each skill's tree. Default: the walker's defaults.
func WithLimits(l Limits) Option {
	return func(o *options) {
		o.limits = tree.Limits{MaxFiles: l.MaxFiles, MaxBytes: l.MaxBytes, MaxFileBytes: l.MaxFileBytes,
			MaxDepth: l.MaxDepth, MaxPathLen: l.MaxPathLen}
	}
}

// WithStrictSpec drops a skill whose frontmatter violates the Agent Skills
// spec. Default: the violation is only logged.
func WithStrictSpec() Option { return func(o *options) { o.strict = true } }

// scanned is one source after the read-only pass.
type scanned struct {
	src    Source
	skill  Skill
	digest string
}

// Materialize copies the selected skills into an owned bundle under stateDir
// (created if missing) and returns it. It reads every source once to learn
// the bundle's identity; when the bundle exists it is reused, otherwise the
// surviving skills are copied into a fresh temporary directory, checked
// against that first read, and published with one rename.
//
// Caller errors (ErrInvalidSource) come back before anything is read. A
// skill that exceeds a limit or changes while it is read fails the whole call
// (ErrLimit, ErrChanged): retrying is safe. An unusable skill is dropped, not
// an error.
func Materialize(ctx context.Context, stateDir string, sources []Source, opts ...Option) (*Bundle, error) {
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkSources(sources); err != nil {
		return nil, err
	}
	b := &Bundle{}
	var kept []scanned
	for _, src := range sources {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sc, reason, err := scan(ctx, src, o)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			b.Dropped = append(b.Dropped, Dropped{Key: src.Key, Name: src.Name, Reason: reason})
			o.log.Warn("skill dropped", "skill.key", src.Key, "skill.name", src.Name, "reason", reason)
			continue
		}
		kept = append(kept, sc)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].src.Name < kept[j].src.Name })
	sort.Slice(b.Dropped, func(i, j int) bool { return b.Dropped[i].Name < b.Dropped[j].Name })
	for _, sc := range kept {
		b.Skills = append(b.Skills, sc.skill)
	}
	b.Identity = identity(b.Skills)
	if len(kept) == 0 {
		return b, nil
	}
	dir, err := publish(ctx, stateDir, b.Identity, kept, o)
	if err != nil {
		return nil, err
	}
	b.Dir = dir
	return b, nil
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
		names[s.Name] = true
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return errors.New("is empty, . or ..")
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

// scan reads one source without writing anything: it checks the directory,
// hashes its tree and reads SKILL.md from the same pass. A non-empty reason
// drops the skill.
func scan(ctx context.Context, src Source, o options) (scanned, string, error) {
	fi, err := os.Lstat(src.Dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return scanned{}, fmt.Sprintf("skill directory %s does not exist", src.Dir), nil
	case err != nil:
		return scanned{}, fmt.Sprintf("skill directory %s cannot be read: %v", src.Dir, err), nil
	case fi.Mode()&fs.ModeSymlink != 0:
		return scanned{}, fmt.Sprintf("skill directory %s is a symbolic link; select the real directory", src.Dir), nil
	case !fi.IsDir():
		return scanned{}, fmt.Sprintf("skill directory %s is not a directory", src.Dir), nil
	}
	var md []byte
	res, err := tree.Walk(ctx, src.Dir, tree.Options{Limits: o.limits}, func(it *tree.Item) error {
		if it.Path == "SKILL.md" && it.Type == tree.File && it.Size <= MaxSkillMD {
			var rerr error
			md, rerr = io.ReadAll(it)
			return rerr
		}
		return nil
	})
	if err != nil {
		return scanned{}, "", fmt.Errorf("reading skill %q at %s: %w", src.Name, src.Dir, err)
	}
	if reason := usable(res, md, src); reason != "" {
		return scanned{}, reason, nil
	}
	meta, err := ParseMeta(md)
	if err != nil {
		return scanned{}, err.Error(), nil
	}
	if err := meta.Validate(src.Name); err != nil {
		if o.strict {
			return scanned{}, err.Error(), nil
		}
		o.log.Warn("skill violates the Agent Skills spec", "skill.key", src.Key, "skill.name", src.Name, "reason", err.Error())
	}
	m := res.Manifest
	return scanned{src: src, digest: m.Digest(), skill: Skill{
		Key: src.Key, Name: src.Name, Description: description(meta.Description),
		Digest: m.Digest(), Files: m.Files(), Bytes: m.Bytes(), Skipped: res.Skipped,
	}}, "", nil
}

// usable says why SKILL.md cannot be used, or "".
func usable(res *tree.Result, md []byte, src Source) string {
	for _, e := range res.Manifest.Entries {
		if e.Path != "SKILL.md" {
			continue
		}
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
	for _, s := range res.Skipped {
		if s == "SKILL.md" {
			if fi, err := os.Lstat(filepath.Join(src.Dir, "SKILL.md")); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				return "SKILL.md is a symbolic link; links are never followed"
			}
			return "SKILL.md is not a regular file"
		}
	}
	return "SKILL.md is missing"
}

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
	enc, err := json.Marshal(rows)
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	h := sha256.New()
	h.Write([]byte(identityTag + "\n"))
	h.Write(enc)
	return Identity{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil))}
}

// publish makes sure <stateDir>/<id> holds the bundle and returns its path.
func publish(ctx context.Context, stateDir string, id Identity, kept []scanned, o options) (string, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", fmt.Errorf("creating skills state directory: %w", err)
	}
	name := strings.TrimPrefix(id.Digest, "sha256:")[:32]
	final := filepath.Join(stateDir, name)
	unlock, err := lock(ctx, filepath.Join(stateDir, "."+name+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if fi, err := os.Lstat(final); err == nil {
		if !fi.IsDir() {
			return "", fmt.Errorf("skills bundle %s exists and is not a directory; remove it", final)
		}
		return final, nil // reused
	}
	// Any temporary directory for this bundle is stale: its writer held
	// this lock and is gone.
	if stale, err := filepath.Glob(filepath.Join(stateDir, ".tmp-"+name+"-*")); err == nil {
		for _, s := range stale {
			os.RemoveAll(s)
		}
	}
	tmp := filepath.Join(stateDir, ".tmp-"+name+"-"+rand.Text()[:10])
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return "", fmt.Errorf("creating temporary bundle: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	for _, sc := range kept {
		res, err := tree.Copy(ctx, sc.src.Dir, filepath.Join(tmp, sc.src.Name), tree.Options{Limits: o.limits})
		if err != nil {
			return "", fmt.Errorf("copying skill %q from %s: %w", sc.src.Name, sc.src.Dir, err)
		}
		if got := res.Manifest.Digest(); got != sc.digest {
			return "", &fs.PathError{Op: "materialize", Path: sc.src.Dir,
				Err: fmt.Errorf("%w: skill %q differs between two reads; retry when it is quiet", ErrChanged, sc.src.Name)}
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("publishing skills bundle %s: %w", final, err)
	}
	ok = true
	return final, nil
}

// Prompt renders the skills block of an agent prompt for the skill root the
// agent will see (a sandbox path, or Dir for a local run). It returns "" when
// no skill survived.
func (b *Bundle) Prompt(root string) string {
	if b == nil || len(b.Skills) == 0 {
		return ""
	}
	if len(root) > 1 {
		root = strings.TrimRight(root, "/")
	}
	names := make([]string, len(b.Skills))
	for i, s := range b.Skills {
		names[i] = s.Name
	}
	var sb strings.Builder
	sb.WriteString("The following skills were materialized for this run.\n")
	fmt.Fprintf(&sb, "Skill root: %s\n", root)
	fmt.Fprintf(&sb, "Selected skills: %s\n", strings.Join(names, ", "))
	for _, s := range b.Skills {
		fmt.Fprintf(&sb, "- %s", s.Name)
		if s.Description != "" {
			fmt.Fprintf(&sb, ": %s", s.Description)
		}
		fmt.Fprintf(&sb, " (file: %s)\n", joinRoot(root, s.Name, "SKILL.md"))
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
