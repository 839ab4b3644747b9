package stage

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/airlockdev/airlock/internal/digest"
	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/tree"
	"github.com/airlockdev/airlock/sandbox"
)

// MaxManifestBytes bounds a manifest read back from a sandbox. A stored
// manifest that is larger is treated as absent, so the asset is published
// again.
const MaxManifestBytes = 64 << 20

// Reserved names under a stage root (the protocol's: see shell.TempPrefix
// and its neighbours, which Dir and Bridge share). Asset names may not
// start with reservedPrefix.
const (
	reservedPrefix = shell.StageReserved
	manifestPrefix = shell.ManifestPrefix
	manifestSuffix = shell.ManifestSuffix
	tempPrefix     = shell.TempPrefix
	maxNameLen     = 128
	// newPrefix starts the name a temporary directory has while it is
	// made: newPrefix + "<pid>-<rand>", pid being the process that makes it
	// (and renames it to its tempPrefix name once its owner file is in
	// it), so that what a process killed in between leaves names its owner.
	newPrefix = shell.NewPrefix
)

// Sentinel errors. Each is wrapped (%w) by the error that reports it.
var (
	// ErrBadAsset reports an Asset that cannot be staged: a bad Name, a
	// duplicate Name, a missing or non-directory Source, a bad Exclude
	// pattern. Stage reports it before anything is written.
	ErrBadAsset = errors.New("invalid asset")
	// ErrBadRoot reports a stage root that is not an absolute, clean
	// sandbox path (or holds a control, line-separator or format
	// character, which a prompt cannot carry), or one where an asset's
	// place is its own Source (or a directory above it) in a sandbox that
	// shares the host's file system.
	ErrBadRoot = errors.New("invalid stage root")
	// ErrTransport is wrapped by every transport failure: a Runner that
	// failed to run a command, a control operation that outlived its
	// deadline. Output that does not follow the bridge protocol (a garbled
	// or oversized reply, a tar stream naming "../x") wraps
	// sandbox.ErrProtocol instead. A transport failure does not prove the
	// sandbox command stopped; Stage never replays the write it
	// interrupted.
	//
	// Deprecated: use sandbox.ErrTransport.
	ErrTransport = sandbox.ErrTransport
	// ErrMismatch reports a sandbox copy that does not match the manifest it
	// was published with (see WithVerify).
	ErrMismatch = errors.New("sandbox copy does not match its manifest")
	// ErrNoContent reports a Target whose Publish returned without reading
	// the tree it was given.
	ErrNoContent = errors.New("target published without reading the tree")
	// ErrTool reports a sandbox that lacks a tool the Bridge's protocol
	// needs (POSIX sh with tar, mkdir, mv, rm, cat and chmod). Trying
	// again does not help: install the tool in the sandbox image.
	ErrTool = errors.New("sandbox tool missing")

	// ErrLink reports a symbolic link in a Source that the asset's
	// LinkPolicy does not allow.
	ErrLink = tree.ErrLink
	// ErrChanged reports a Source file that changed while it was read;
	// staging again when the tree is quiet succeeds.
	ErrChanged = tree.ErrChanged
	// ErrLimit reports a Source over a size limit (files, bytes, depth, path
	// length: 4,086 bytes inside an asset, what the sandbox's tar can name
	// under the stream's temporary tree).
	ErrLimit = tree.ErrLimit
)

// LinkPolicy says what staging does with a symbolic link in a Source.
type LinkPolicy int

const (
	// SkipLinks (the zero value) never follows a link: it is left out of
	// the sandbox copy and reported in StagedAsset.Skipped.
	SkipLinks LinkPolicy = iota
	// RejectLinks fails the stage (wrapping ErrLink) on any link.
	RejectLinks
	// FollowLinksWithin follows a link only when its target resolves inside
	// Source; a link that leaves Source (an absolute target, or ".." above
	// Source) fails the stage (wrapping ErrLink). A dangling link, a link
	// loop or cycle, and a link to a directory already staged through a link
	// are left out and listed in StagedAsset.Skipped: each directory is
	// copied at most twice (at its real place and through the first link
	// that reaches it), so staging costs time linear in what is on disk.
	// There is no policy that follows links anywhere.
	FollowLinksWithin
)

// String implements fmt.Stringer: the policy's name, or "LinkPolicy(N)"
// for an unknown value.
func (p LinkPolicy) String() string {
	if tp, ok := p.tree(); ok {
		return tp.String()
	}
	return fmt.Sprintf("LinkPolicy(%d)", int(p))
}

func (p LinkPolicy) tree() (tree.LinkPolicy, bool) {
	switch p {
	case SkipLinks:
		return tree.SkipLinks, true
	case RejectLinks:
		return tree.RejectLinks, true
	case FollowLinksWithin:
		return tree.FollowLinksWithin, true
	}
	return 0, false
}

// Asset is one host directory to put into the sandbox.
type Asset struct {
	Name    string     // one path segment: the directory under the stage root
	Source  string     // host directory, absolute
	Links   LinkPolicy // zero value SkipLinks
	Exclude []string   // path.Match patterns against slash paths relative to Source
}

// Runtime maps each staged asset's host Source to its in-sandbox Path.
type Runtime struct {
	Root   string        // the in-sandbox stage root passed to Stage; each asset lives in Root/Name
	Assets []StagedAsset // one per staged asset, in the order given to Stage
}

// StagedAsset reports one staged asset.
//
// Digest is "sha256:" and 64 lowercase hex digits: the SHA-256 of the
// asset's canonical manifest, the bytes stored beside the copy as
// Root/.airlock-manifest-<Name>.json (every entry's path, type, mode, size
// and SHA-256, sorted by path). Two copies with the same Digest hold the
// same tree; it does not depend on the host, the Source's path or times.
type StagedAsset struct {
	Name, Source, Path, Digest string   // Path: in-sandbox directory; Digest: manifest digest (see above)
	Files                      int      // regular files in the staged copy
	Sent                       int      // regular files whose content crossed to the sandbox; the rest were carried over from its previous copy (delta publish) or reused
	Bytes                      int64    // total size in bytes of the regular files in the staged copy
	Skipped                    []string // links, special files and directories a followed link would copy a second time, left out; relative slash paths
	Reused                     bool     // the sandbox already held exactly this content
}

// AssetError reports the failure of one asset of a Stage or Unstage call.
// Err wraps the package's sentinels (ErrTransport, ErrLink, ErrChanged,
// ErrLimit, ErrMismatch, ErrBadAsset, …), so errors.Is works through it.
type AssetError struct {
	Op   string // "read" (the host Source), "publish", "verify", "probe"
	Name string // the asset's Name
	Path string // the in-sandbox path, or the host Source for "read"
	Err  error  // the cause
}

// Error implements error: the operation, the asset's Name and path, and
// the cause.
func (e *AssetError) Error() string {
	return fmt.Sprintf("stage: %s asset %q (%s): %v", e.Op, e.Name, e.Path, e.Err)
}

// Unwrap returns Err.
func (e *AssetError) Unwrap() error { return e.Err }

// Path returns the in-sandbox directory of the asset called name.
func (r *Runtime) Path(name string) (string, bool) {
	if r == nil {
		return "", false
	}
	for _, a := range r.Assets {
		if a.Name == name {
			return a.Path, true
		}
	}
	return "", false
}

// Option configures Stage.
type Option func(*options)

type options struct {
	log      *slog.Logger
	progress func(sandbox.Progress)
	verify   bool
	index    *Index
	prune    bool
	now      func() time.Time
	racy     time.Duration // see racyWindow; tests shorten it
}

// WithLogger sends Stage's log records to l. Default: discarded.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithProgress calls fn as the stage advances, from the calling goroutine of
// Stage or of the Target's Publish. Default: none. Setting it adds a
// metadata-only pass over each Source to compute the totals.
func WithProgress(fn func(sandbox.Progress)) Option {
	return func(o *options) { o.progress = fn }
}

// WithVerify makes Stage read every staged asset back from the sandbox and
// compare it, hash by hash, with the manifest. A reused copy that fails the
// check is published again; a fresh copy that fails it fails the stage with
// ErrMismatch. The read-back follows the publish: a cancellation during
// it fails the stage (an AssetError with Op "verify") with the new copy
// already in place, unverified; staging again with WithVerify checks it.
// Default: off (a reused copy is trusted on its stored manifest).
func WithVerify() Option {
	return func(o *options) { o.verify = true }
}

// WithIndex lets Stage skip hashing a Source whose metadata (names, types,
// modes, sizes, inode numbers, modification and change times) is unchanged
// since ix last saw it staged, the way git's index avoids re-reading
// unchanged files. The sandbox is still asked for its stored manifest (one
// round trip). The fingerprint is trusted only when every entry's times
// are at least racyWindow (2 s) old and not in the future; a Source it
// cannot trust is read and compared with that manifest, as without an
// Index. A Source whose trusted fingerprint moved since the Index saw it
// staged is compared by the Target as it publishes, where carrying its
// unchanged files may pay: a Bridge that has learnt from its own
// publishes that sending the previous copy's files costs less than
// comparing and carrying them sends the Source whole without comparing
// (a delta never costs more than a full stage), so a Source that was
// touched (its times moved) but not changed is then published again
// rather than reused. Default: none; every Source is read in full.
func WithIndex(ix *Index) Option {
	return func(o *options) { o.index = ix }
}

// Stage copies each asset into <root>/<Name> on t and returns the Runtime
// that maps host sources to sandbox paths.
//
// Every asset is checked before anything is written. An asset whose stored
// manifest already equals its Source's is left alone (Reused; with
// WithIndex, see there for the one exception). Any other is
// published atomically by t: a failure or a cancellation leaves the previous
// complete copy in place. Assets are staged in order; on error the assets
// before the failing one stay staged.
func Stage(ctx context.Context, t Target, root string, assets []Asset, opts ...Option) (*Runtime, error) {
	o := options{log: slog.New(slog.DiscardHandler), now: time.Now, racy: racyWindow}
	for _, opt := range opts {
		opt(&o)
	}
	if t == nil {
		return nil, errors.New("stage: nil Target")
	}
	if err := checkRoot(root); err != nil {
		return nil, err
	}
	plans, err := plan(assets)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &stager{ctx: ctx, t: t, root: root, o: o}
	names := make([]string, len(plans))
	for i, p := range plans {
		names[i] = p.asset.Name
	}
	// The sandbox's manifests are asked for while the sources are
	// fingerprinted: a round trip to the sandbox and a walk of the host's
	// trees, at once.
	type probed struct {
		stored [][]byte
		err    error
		took   time.Duration
	}
	probe := make(chan probed, 1)
	go func() {
		t0 := time.Now()
		stored, err := t.Probe(ctx, root, names)
		probe <- probed{stored, err, time.Since(t0)}
	}()
	if len(plans) > 0 && (o.progress != nil || o.index != nil) {
		share := max(1, maxSeen/len(plans))
		for _, p := range plans {
			p.meta, p.seen = tree.FingerprintSeen(ctx, p.src, p.opts, o.now().Add(-o.racy), share)
			top := p.seen.TopLevel()
			p.split = p.meta.Files >= shell.SplitFiles && (top < 0 || 2 <= top && top <= maxSplitTop)
			s.prog.TotalFiles += p.meta.Files
			s.prog.TotalBytes += p.meta.Bytes
		}
	}
	pr := <-probe
	if pr.err != nil {
		return nil, fmt.Errorf("stage: %w", pr.err)
	}
	stored := pr.stored
	o.log.Debug("stage: probed the sandbox's manifests", "root", root, "assets", len(names), "took", pr.took)
	if len(stored) != len(names) {
		return nil, fmt.Errorf("%w: target returned %d manifests for %d assets under %s", ErrTransport, len(stored), len(names), root)
	}
	rt := &Runtime{Root: root}
	for i, p := range plans {
		sa, err := s.stageOne(p, stored[i])
		if err != nil {
			return nil, err
		}
		rt.Assets = append(rt.Assets, sa)
	}
	if o.prune {
		if err := s.prune(plans); err != nil {
			return nil, err
		}
	}
	return rt, nil
}

// checkRoot validates an in-sandbox stage root.
func checkRoot(root string) error {
	switch {
	case root == "" || !path.IsAbs(root):
		return fmt.Errorf("%w: %q is not absolute; pass an absolute sandbox path such as /tmp/airlock/rt", ErrBadRoot, root)
	case path.Clean(root) != root:
		return fmt.Errorf("%w: %q is not clean (want %q)", ErrBadRoot, root, path.Clean(root))
	case root == "/":
		return fmt.Errorf("%w: the sandbox's / cannot be a stage root; pass a directory below it", ErrBadRoot)
	case strings.ContainsRune(root, 0) || !utf8.ValidString(root):
		return fmt.Errorf("%w: %q holds a NUL byte or invalid UTF-8", ErrBadRoot, root)
	}
	for _, r := range root {
		// The root is written into the agent's prompt as given
		// (skills.Bundle.Prompt): nothing there may start a line or
		// reorder one.
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("%w: %q holds a control, line-separator or format character (%U), which the agent's prompt cannot carry; pass a plain path", ErrBadRoot, root, r)
		}
	}
	return nil
}

// checkName validates an asset name: one path segment, not reserved.
func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("name %q is not a directory name", name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("name %q must be one path segment (no slash, backslash or NUL)", name)
	case len(name) > maxNameLen:
		return fmt.Errorf("name %q is longer than %d bytes", name, maxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("name %q is not valid UTF-8", name)
	case strings.HasPrefix(name, reservedPrefix):
		return fmt.Errorf("name %q starts with %q, which is reserved for airlock's own files", name, reservedPrefix)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("name %q holds a control character", name)
		}
	}
	return nil
}

// planned is one validated asset.
type planned struct {
	asset Asset
	src   string // cleaned Source
	opts  tree.Options
	key   string        // Index key
	meta  tree.Metadata // metadata pass, when run
	// seen is what the metadata pass saw of the Source (tree.Seen), for
	// the comparing walk that may follow: it then lists and lstat's the
	// tree only once. Let go once compared.
	seen *tree.Seen
	// split: the metadata pass found a large Source (see Tree.split).
	split bool
}

// maxSplitTop bounds the entries at a Source's top for which a Bridge's
// sandbox splits its work in two (shell.Send.Split): each half is a list
// of them, and the shell sorts the list (45 ms for 38,000 names).
const maxSplitTop = 512

// maxSeen bounds the entries the metadata pass of one Stage keeps for the
// comparing walks (tree.Seen, some 130 bytes each, so some 8 MiB), shared
// by its assets: what an asset's share does not hold its compare lists
// again.
var maxSeen = 1 << 16

func plan(assets []Asset) ([]*planned, error) {
	seen := make(map[string]bool, len(assets))
	out := make([]*planned, 0, len(assets))
	for i, a := range assets {
		if err := checkName(a.Name); err != nil {
			return nil, fmt.Errorf("%w: asset %d: %v; pick a plain directory name such as \"skills\"", ErrBadAsset, i, err)
		}
		if seen[a.Name] {
			return nil, fmt.Errorf("%w: asset %q is listed twice; give each asset its own name", ErrBadAsset, a.Name)
		}
		seen[a.Name] = true
		links, ok := a.Links.tree()
		if !ok {
			return nil, fmt.Errorf("%w: asset %q: unknown link policy %v", ErrBadAsset, a.Name, a.Links)
		}
		if !filepath.IsAbs(a.Source) {
			return nil, fmt.Errorf("%w: asset %q: source %q is not an absolute host path", ErrBadAsset, a.Name, a.Source)
		}
		src := filepath.Clean(a.Source)
		fi, err := os.Lstat(src)
		if err != nil {
			return nil, fmt.Errorf("%w: asset %q: %w", ErrBadAsset, a.Name, err)
		}
		if !fi.IsDir() {
			what := "not a directory"
			if fi.Mode()&fs.ModeSymlink != 0 {
				what = "a symbolic link; pass the directory it points to"
			}
			return nil, fmt.Errorf("%w: asset %q: source %s is %s", ErrBadAsset, a.Name, src, what)
		}
		for _, pat := range a.Exclude {
			if _, err := path.Match(pat, ""); err != nil {
				return nil, fmt.Errorf("%w: asset %q: exclude pattern %q: %w", ErrBadAsset, a.Name, pat, err)
			}
		}
		opts := tree.Options{Links: links, Limits: tree.Limits{MaxPathLen: maxPathLen, Advice: limitAdvice}}
		if len(a.Exclude) > 0 {
			pats := append([]string(nil), a.Exclude...)
			opts.Exclude = func(rel string, _ bool) bool {
				for _, p := range pats {
					if ok, _ := path.Match(p, rel); ok {
						return true
					}
				}
				return false
			}
		}
		a.Source = src
		out = append(out, &planned{asset: a, src: src, opts: opts, key: indexKey(a)})
	}
	return out, nil
}

// stager carries one Stage call.
type stager struct {
	ctx  context.Context
	t    Target
	root string
	o    options
	prog sandbox.Progress
}

func (s *stager) report(asset string, files int, bytes int64) {
	if s.o.progress == nil {
		return
	}
	s.prog.Asset = asset
	s.prog.Files += files
	s.prog.Bytes += bytes
	s.prog.TotalFiles = max(s.prog.TotalFiles, s.prog.Files)
	s.prog.TotalBytes = max(s.prog.TotalBytes, s.prog.Bytes)
	s.o.progress(s.prog)
}

// storedDigest returns the digest of a stored manifest, "" when there is
// none. The manifest is canonical JSON, so its digest is the SHA-256 of its
// bytes: parsing is only needed when the content is used.
func storedDigest(b []byte) string {
	if b == nil || len(b) > MaxManifestBytes {
		return ""
	}
	return digest.Of(b)
}

func (s *stager) stageOne(p *planned, stored []byte) (StagedAsset, error) {
	name := p.asset.Name
	sa := StagedAsset{Name: name, Source: p.src, Path: path.Join(s.root, name)}
	have := storedDigest(stored)
	start := s.o.now()
	log := s.o.log.With("asset", name, "source", p.src, "path", sa.Path)

	// reuse reports the sandbox copy as reused, after WithVerify's check; a
	// copy that fails the check is published again.
	reuse := func(sa StagedAsset, how string, fromIndex bool) (StagedAsset, error) {
		sa.Reused = true
		if s.o.verify {
			ok, err := s.verifyReused(p, &sa, stored, log)
			if err != nil {
				return StagedAsset{}, err
			}
			if !ok {
				return s.publish(p, sa, log, start, compared{}, nil)
			}
		}
		if !fromIndex {
			s.remember(p, sa)
		}
		s.report(name, sa.Files, sa.Bytes)
		log.Debug(how, "digest", sa.Digest)
		return sa, nil
	}

	// Fast path: metadata unchanged since the index saw this source staged.
	moved := false // the index saw this Source staged, and its metadata moved since
	if ix := s.o.index; ix != nil && have != "" {
		rec, hit, held := ix.lookup(p.key, p.meta)
		if hit && rec.digest == have {
			sa.Digest, sa.Files, sa.Bytes, sa.Skipped = rec.digest, rec.files, rec.bytes, rec.skipped
			return reuse(sa, "stage: reused (index)", true)
		}
		moved = held // a usable fingerprint, and a record of the Source
	}
	// A stored manifest exists: hash the source and compare before writing.
	// Where the index saw the Source staged and a fingerprint it can trust
	// moved since, the Source most likely changed: the comparison is left
	// to the Target, which runs it when carrying the unchanged files may
	// pay (see laterCompare). An untrusted fingerprint (files written in
	// the last seconds, or dated in the future) says nothing either way:
	// the comparison runs first, and finds an unchanged Source.
	var c compared
	var later *laterCompare
	switch {
	case have == "":
	case moved:
		later = s.laterCompare(p, stored, have, log)
	default:
		old, err := tree.ParseManifest(stored)
		if err != nil {
			old = tree.Manifest{}
		}
		t0 := s.o.now()
		if c, err = s.compare(p, old, have); err != nil {
			return StagedAsset{}, sourceErr(name, p.src, err)
		}
		log.Debug("stage: compared the source with the sandbox's manifest", "files", c.files, "unchanged", len(c.unchanged), "trusted", c.trusted, "took", s.o.now().Sub(t0))
		if c.digest == have {
			sa.Digest, sa.Files, sa.Bytes, sa.Skipped = c.digest, c.files, c.bytes, c.skipped
			return reuse(sa, "stage: reused", false)
		}
	}
	out, err := s.publish(p, sa, log, start, c, later)
	if err == nil && later != nil && later.whole {
		c = later.c
		sa.Digest, sa.Files, sa.Bytes, sa.Skipped = c.digest, c.files, c.bytes, c.skipped
		return reuse(sa, "stage: reused (compared by the target)", false)
	}
	return out, err
}

// laterCompare is the comparison of a Source with the sandbox's stored
// manifest that Stage leaves to the Target (Tree.Unchanged runs it on
// first use): where an Index saw the Source staged and a fingerprint it
// can trust moved since, the comparison serves only to carry unchanged
// files and to find a Source that was touched, not changed. A Bridge
// runs it only when its learnt costs say carrying all the previous
// copy's files might pay (else sending everything, without the comparing
// walk, is the cheaper stage: a delta never costs more than a full one);
// a Target of this package that finds the Source equal to the copy in
// place publishes nothing (whole), and Stage reports the copy reused.
type laterCompare struct {
	files    int    // regular files of the stored manifest
	tarBytes int64  // what sending them all takes in a tar stream
	have     string // the stored manifest's digest
	run      func() compared
	once     sync.Once
	c        compared // run's outcome, once it ran
	whole    bool     // the Target found the Source equal to the copy in place
}

// laterCompare returns the comparison with the stored manifest for the
// Target to run. Its files and bytes are an estimate from a scan of the
// manifest's bytes (the sandbox's, untrusted: a wrong estimate costs time,
// never correctness); the parse waits for the comparison.
func (s *stager) laterCompare(p *planned, stored []byte, have string, log *slog.Logger) *laterCompare {
	l := &laterCompare{have: have}
	tree.ManifestFileSizes(stored, func(size int64) {
		l.files++
		l.tarBytes += tarBytes(size)
	})
	l.run = func() compared {
		t0 := s.o.now()
		old, err := tree.ParseManifest(stored)
		if err != nil {
			return compared{} // unusable: nothing to carry, everything is sent
		}
		c, err := s.compare(p, old, have)
		if err != nil {
			// The publish's walk meets the Source's failure and reports it.
			log.Debug("stage: comparing the source with the sandbox's manifest failed; nothing is carried", "err", err)
			return compared{}
		}
		log.Debug("stage: compared the source with the sandbox's manifest", "files", c.files, "unchanged", len(c.unchanged), "trusted", c.trusted, "took", s.o.now().Sub(t0))
		return c
	}
	return l
}

// compared is what comparing a Source with the sandbox's stored manifest
// found.
type compared struct {
	digest    string // the Source's manifest digest; "" when it differs for sure
	files     int
	bytes     int64
	skipped   []string
	base      string               // lowercase hex SHA-256 of the stored manifest compared with
	trusted   int                  // files not read: the Index's stamps vouched for their hash
	unchanged []UnchangedFile      // regular files the stored manifest describes exactly
	known     map[string]knownFile // their hashes and stamps, by path
}

// knownFile is a Source file's hash from the comparing walk, and the Stamp
// that walk took of it.
type knownFile struct {
	sum   [32]byte
	stamp tree.Stamp
	i     int // its UnchangedFile's index in compared.unchanged
}

// compare walks the Source against the stored manifest old (the
// sandbox's, untrusted: parsed strictly, empty when unusable). Only files
// that the stored manifest lists with the same path, mode and size are
// read and hashed: any other file proves the asset changed, and is hashed once,
// by the publish that sends it. The files whose hash also matches are the
// unchanged ones that a delta publish may carry over; their hashes and
// stamps let the publish's walk skip reading them again. have is the
// stored manifest's digest (storedDigest), which the carry checks the
// sandbox's manifest against.
func (s *stager) compare(p *planned, old tree.Manifest, have string) (compared, error) {
	type storedFile struct {
		mode fs.FileMode
		size int64
		sum  [32]byte
		hex  string
	}
	byPath := make(map[string]storedFile, len(old.Entries))
	for _, e := range old.Entries {
		if e.Type == tree.File {
			f := storedFile{mode: e.Mode, size: e.Size, hex: e.SHA256}
			hex.Decode(f.sum[:], []byte(e.SHA256)) // ParseManifest checked it
			byPath[e.Path] = f
		}
	}
	opts := p.opts
	opts.Compact, opts.Stamps = true, true
	trusted := 0 // files whose recorded hash the stamps vouch for
	if s.o.index != nil {
		if f := s.o.index.stamps(p.key); f != nil {
			opts.Known = func(rel string, st tree.Stamp) ([32]byte, bool) {
				sum, ok := f.known(rel, st)
				if ok {
					trusted++
				}
				return sum, ok
			}
		}
	}
	opts.SkipContent = func(e tree.Entry) bool {
		o, ok := byPath[e.Path]
		return !ok || o.mode != e.Mode || o.size != e.Size
	}
	// The metadata pass's listing and lstat stand for the walk's own: a
	// file that changed since is seen by the publish's walk, which lstat's
	// every file again (a carried one whose stamp moved fails it).
	opts.Seen, p.seen = p.seen, nil
	res, err := tree.Walk(s.ctx, p.src, opts, nil)
	if err != nil {
		return compared{}, err
	}
	l := res.Listing
	c := compared{files: l.Files(), bytes: l.Bytes(), skipped: res.Skipped, trusted: trusted, base: strings.TrimPrefix(have, digest.Prefix)}
	if l.Unread() == 0 {
		c.digest = l.Digest()
	}
	l.EachFile(func(path []byte, perm fs.FileMode, size int64, sum [32]byte, st tree.Stamp) {
		o, ok := byPath[string(path)]
		if !ok || o.mode != perm || o.size != size || o.sum != sum {
			return
		}
		p := string(path)
		c.unchanged = append(c.unchanged, UnchangedFile{Path: p, Mode: perm, Size: size, SHA256: o.hex})
		if c.known == nil {
			c.known = make(map[string]knownFile)
		}
		c.known[p] = knownFile{sum: sum, stamp: st, i: len(c.unchanged) - 1}
	})
	return c, nil
}

// verifyReused checks a copy about to be reported as reused. false means it
// does not match and must be published again.
func (s *stager) verifyReused(p *planned, sa *StagedAsset, stored []byte, log *slog.Logger) (bool, error) {
	err := verify(s.ctx, s.t, s.root, sa.Name, stored)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, ErrMismatch) {
		return false, &AssetError{Op: "verify", Name: sa.Name, Path: sa.Path, Err: err}
	}
	log.Warn("stage: sandbox copy differs from its manifest; publishing again", "err", err)
	sa.Reused = false
	return false, nil
}

// publish has the Target publish p; later, when set, is the comparison
// left to the Target. When the Target found the copy in place equal
// (later.whole), publish returns without remembering anything: stageOne
// reports the copy reused.
func (s *stager) publish(p *planned, sa StagedAsset, log *slog.Logger, start time.Time, c compared, later *laterCompare) (StagedAsset, error) {
	name := p.asset.Name
	tr := &Tree{src: p.src, opts: p.opts, mtime: start.Truncate(time.Second), unchanged: c.unchanged, known: c.known, base: c.base, later: later, split: p.split}
	if ix := s.o.index; ix != nil {
		tr.stampsBefore = start.Add(-s.o.racy)
		tr.keep = func(f *fileStamps) { ix.keepStamps(p.key, f) }
		defer tr.waitKept() // before Stage returns, whatever the publish did
	}
	if s.o.progress != nil {
		// Only then: a Target that copies reports each file done through
		// a hook that costs memory per file.
		tr.onFile = func(size int64) { s.report(name, 1, size) }
	}
	if err := s.t.Publish(s.ctx, s.root, name, tr); err != nil {
		var ce *tree.CopyError
		switch {
		case errors.As(err, &ce):
			// The sandbox's file system failed a write of the copy (Dir).
			return StagedAsset{}, &AssetError{Op: "publish", Name: name, Path: sa.Path, Err: sandboxFull(err)}
		case tr.walkErr != nil && errors.Is(err, tr.walkErr):
			return StagedAsset{}, sourceErr(name, p.src, err)
		}
		return StagedAsset{}, &AssetError{Op: "publish", Name: name, Path: sa.Path, Err: err}
	}
	if later != nil && later.whole {
		return StagedAsset{}, nil
	}
	if !tr.done {
		return StagedAsset{}, &AssetError{Op: "publish", Name: name, Path: sa.Path, Err: ErrNoContent}
	}
	sa.Digest, sa.Files, sa.Bytes, sa.Skipped, sa.Reused = tr.digest(), tr.sum.files, tr.sum.bytes, tr.sum.skipped, false
	sa.Sent = sa.Files - len(tr.carried)
	if s.o.verify {
		if err := verify(s.ctx, s.t, s.root, name, tr.manifestBytes()); err != nil {
			return StagedAsset{}, &AssetError{Op: "verify", Name: name, Path: sa.Path, Err: err}
		}
	}
	s.remember(p, sa)
	log.Debug("stage: published", "digest", sa.Digest, "files", sa.Files, "bytes", sa.Bytes, "skipped", len(sa.Skipped), "took", s.o.now().Sub(start))
	return sa, nil
}

func (s *stager) remember(p *planned, sa StagedAsset) {
	if s.o.index != nil {
		s.o.index.store(p.key, p.meta, sa)
	}
}

// sandboxFull adds the next step to err when it is a full file system or
// quota in the sandbox.
func sandboxFull(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w (the sandbox's file system is full: free space there and stage again; the previous copy is in place)", err)
	}
	return err
}

// sourceErr reports a failure to read a Source.
func sourceErr(name, src string, err error) error {
	return &AssetError{Op: "read", Name: name, Path: src, Err: err}
}

// Tree is the content of one asset on its way into the sandbox: a single,
// link-safe pass over the host Source. Stage hands it to Target.Publish.
type Tree struct {
	src       string
	opts      tree.Options
	mtime     time.Time
	onFile    func(size int64)
	unchanged []UnchangedFile
	carried   map[string]string    // path → SHA-256 the carried copy must have
	known     map[string]knownFile // unchanged files' hashes from the comparing walk
	base      string               // lowercase hex SHA-256 of the manifest unchanged describes
	// later, when set, is the comparison that sets unchanged, known and
	// base, left to the Target (see laterCompare): Unchanged runs it.
	later *laterCompare
	// stampsBefore, when set, makes the walk keep each file's Stamp, and
	// a finished walk hand them to keep (the Index's), on a goroutine of
	// their own while the Target publishes: they say what the host's
	// files hold, whatever the publish does. kept is closed once keep
	// returned; keepMu guards kept and waited (waitKept ran: a walk that
	// a failed publish left behind and that finishes later keeps nothing).
	stampsBefore time.Time
	keep         func(*fileStamps)
	keepMu       sync.Mutex
	kept         chan struct{}
	waited       bool
	walking      bool
	walked       bool
	// split: the Source is large (shell.SplitFiles regular files or more,
	// at most maxSplitTop entries at its top where the metadata pass
	// kept them): a Bridge's sandbox lists its stamps and deletes the old
	// copy in two processes at once (shell.Send.Split).
	split bool
	// sameModes: the Target's carried files keep the mode the compare
	// found (Walk: a Target links or copies them in the sandbox), so a
	// carried file whose mode changed since is ErrChanged; a local copy
	// (copyInto) gives them the walk's mode itself.
	sameModes bool
	done      bool    // Walk returned nil
	sum       treeSum // what Walk read
	// The manifest of a finished walk: list (compact) until the bytes are
	// needed, then manifest. A Target that writes locally streams list
	// into its manifest file and never holds the bytes.
	list     *tree.Listing
	manifest []byte
	walkErr  error
}

// UnchangedFile is a regular file of a Tree that the sandbox's current copy
// already holds, per the manifest stored with that copy: same path, mode,
// size and SHA-256 (lowercase hex).
type UnchangedFile struct {
	Path   string      // slash path relative to the tree's root
	Mode   fs.FileMode // permission bits
	Size   int64       // in bytes
	SHA256 string      // lowercase hex SHA-256 of the content
}

// Unchanged lists, in path order, the regular files of the tree that equal
// a file of the copy the sandbox holds now (see UnchangedFile), or nil when
// there is no usable previous copy. A Target that supports delta publish
// copies them from that copy into the new one, checks each copy against its
// SHA-256 in the sandbox, and calls Carry for those that passed instead of
// reading them from the host; the others it writes from Walk's reader as
// usual. The list describes the sandbox's stored manifest, which the
// sandbox controls: a Target must check the copied bytes, never trust it.
//
// With WithIndex the list is made on the first call (a walk of the
// Source), so a Target that carries nothing need not call it; call it
// before Walk: a first call after Walk started finds none.
func (t *Tree) Unchanged() []UnchangedFile {
	t.compareLater()
	return t.unchanged
}

// compareLater runs, once, the comparison Stage left to the Target.
func (t *Tree) compareLater() {
	if l := t.later; l != nil {
		l.once.Do(func() {
			l.c = l.run()
			t.unchanged, t.known, t.base = l.c.unchanged, l.c.known, l.c.base
		})
	}
}

// settle ends the chance of the comparison left to the Target: from now
// on the Tree has the unchanged files it has (none, when it was not run).
func (t *Tree) settle() {
	if l := t.later; l != nil {
		l.once.Do(func() {})
	}
}

// reuseWhole, called by a Target of this package as its Publish starts,
// runs the comparison Stage left to it when compare is true (else settles
// the Tree without it: nothing is carried) and reports whether it found
// the Source equal to the copy in place. The Target then publishes
// nothing, and Stage reports the copy reused.
func (t *Tree) reuseWhole(compare bool) bool {
	l := t.later
	if l == nil {
		return false
	}
	if !compare {
		t.settle()
		return false
	}
	t.compareLater()
	l.whole = l.c.digest != "" && l.c.digest == l.have
	return l.whole
}

// previous returns the regular files of the sandbox's copy, and what
// sending them all takes in a tar stream, where the comparison with it is
// left to the Target; false otherwise.
func (t *Tree) previous() (files int, tarBytes int64, ok bool) {
	if l := t.later; l != nil {
		return l.files, l.tarBytes, true
	}
	return 0, 0, false
}

// Carry, called from Walk's fn for a regular file listed by Unchanged,
// tells Walk that the Target has put a checked copy of it in place from the
// sandbox's previous copy, so its content is not sent. Walk still checks
// the host file, so that the manifest stays exact: when fn read none of it
// and it shows the identity, size, modification and change time that
// Stage's comparing walk saw when it hashed it (the evidence a walk has
// that a file did not change while read), that hash stands and the file
// is not read again; otherwise Walk reads and hashes it. Either way Walk
// fails with ErrChanged when the file no longer has the SHA-256 the copy
// was checked against: staging again when the tree is quiet succeeds.
func (t *Tree) Carry(e Entry) error {
	if !t.walking {
		return errors.New("stage: Tree.Carry called outside Walk")
	}
	if _, ok := t.carry(e.Path); !ok || !e.Mode.IsRegular() {
		return fmt.Errorf("stage: Tree.Carry(%q): not an unchanged file of this tree", e.Path)
	}
	return nil
}

// resend reads again the unchanged file rel, which a finished walk took
// as carried, and hands it to fn: the sandbox did not carry it after all
// (an early stream, see earlyStream). It must still be the file the
// manifest lists (path, mode, size and SHA-256), else ErrChanged; it is no
// longer counted as carried.
func (t *Tree) resend(rel string, fn func(e Entry, r io.Reader) error) error {
	u, ok := t.unchangedFile(rel)
	if !ok || t.carried[rel] == "" {
		return fmt.Errorf("stage: resend %q: not a carried file of this tree", rel)
	}
	changed := func(why string) error {
		return fmt.Errorf("%w: %s %s while it was staged (the sandbox did not carry its unchanged copy, so it was read again): stage again", ErrChanged, path.Join(t.src, rel), why)
	}
	f, err := tree.OpenFile(t.src, rel)
	if err != nil {
		return changed(fmt.Sprintf("could not be opened again (%v)", err))
	}
	defer f.Close()
	it, err := tree.NewReader(f, rel)
	if err != nil {
		return changed(fmt.Sprintf("could not be read again (%v)", err))
	}
	if it.Size != u.Size || it.Mode.Perm() != u.Mode.Perm() {
		return changed("changed size or mode")
	}
	if err := fn(Entry{Path: rel, Mode: u.Mode.Perm(), Size: u.Size}, it); err != nil {
		return err
	}
	if err := it.Verify(); err != nil {
		return err
	}
	if it.SHA256 != u.SHA256 {
		return changed("changed")
	}
	delete(t.carried, rel)
	return nil
}

// sameMode reports whether perm is the mode the compare found for the
// unchanged file rel.
func (t *Tree) sameMode(rel string, perm fs.FileMode) bool {
	u, ok := t.unchangedFile(rel)
	return ok && u.Mode.Perm() == perm
}

// unchangedFile returns the unchanged file rel (Tree.Unchanged), as the
// compare found it.
func (t *Tree) unchangedFile(rel string) (UnchangedFile, bool) {
	k, ok := t.known[rel]
	if !ok {
		return UnchangedFile{}, false
	}
	return t.unchanged[k.i], true
}

// carry records the unchanged file rel as carried and returns its size;
// false when rel is not one.
func (t *Tree) carry(rel string) (int64, bool) {
	u, ok := t.unchangedFile(rel)
	if !ok {
		return 0, false
	}
	if t.carried == nil {
		t.carried = make(map[string]string)
	}
	t.carried[rel] = u.SHA256
	return u.Size, true
}

// Entry describes one entry of a tree: a directory (Mode.IsDir) or a
// regular file (Mode.IsRegular). Mode holds the type bits and the
// permission bits. When a Target reads a sandbox copy back (Fetch), other
// types are reported too, so that the caller can reject them.
type Entry struct {
	Path string      // slash-separated, relative to the asset directory; never "" or "."
	Mode fs.FileMode // type and permission bits
	Size int64       // regular files only
}

// maxPathLen bounds a path inside an asset: the stream names each entry
// under shell.TarTree, and the sandbox's tar must be able to name it
// (PATH_MAX, 4,096 bytes with the terminating NUL). A longer path is
// refused with ErrLimit before anything is written.
const maxPathLen = tree.DefaultMaxPathLen - len(shell.TarTree) - 1

// limitAdvice is what an ErrLimit of Stage tells the caller: its limits
// are not options.
const limitAdvice = "shrink the tree or leave that part out (Asset.Exclude); Stage's limits are fixed"

// ModTime is the modification time a Target may give every staged entry
// (the start of the stage, whole seconds); a Target may as well leave each
// entry the time it wrote it (a Bridge whose sandbox tar takes -m does: on
// ext4 restoring times is a sixth of tar's work). Content identity never
// depends on it.
func (t *Tree) ModTime() time.Time { return t.mtime }

// Walk streams the tree: fn is called for every directory and regular file,
// depth first, names sorted, a directory before its contents. For a file,
// r yields exactly e.Size bytes and is valid only until fn returns; fn may
// read all, part or none of it. Walk returns the canonical manifest (JSON)
// of exactly what fn was given; a Target stores it beside the asset and
// publishes only after Walk returned nil. A Tree can be walked once.
func (t *Tree) Walk(ctx context.Context, fn func(e Entry, r io.Reader) error) ([]byte, error) {
	return t.walk(ctx, nil, fn)
}

// walk is Walk. carried, when not nil, is asked about each unchanged file
// whose lstat still gives the Stamp the compare took of it: true means the
// Target has carried it over already (a Bridge's carry, which runs before
// its stream). Such a file is carried (Carry) and listed with the
// compare's hash without being opened, and fn is not called for it: the
// stream of a delta opens only the files it sends. Any other file is
// opened and given to fn as Walk gives it, and a carried one whose Stamp
// moved since the compare fails the walk there (ErrChanged), as before.
func (t *Tree) walk(ctx context.Context, carried func(rel string) bool, fn func(e Entry, r io.Reader) error) ([]byte, error) {
	t.sameModes = true
	err := t.run(func(opts tree.Options) (*tree.Result, error) {
		if carried != nil {
			opts.Known = func(rel string, st tree.Stamp) ([32]byte, bool) {
				k, ok := t.known[rel]
				if !ok || !st.Valid() || st != k.stamp || !carried(rel) {
					return [32]byte{}, false
				}
				size, ok := t.carry(rel)
				if ok && t.onFile != nil {
					t.onFile(size)
				}
				return k.sum, ok
			}
		}
		return tree.Walk(ctx, t.src, opts, func(it *tree.Item) error {
			e := Entry{Path: it.Path, Mode: it.Mode.Perm(), Size: it.Size}
			if it.Type == tree.Dir {
				e.Mode |= fs.ModeDir
				return fn(e, eofReader{})
			}
			if err := fn(e, it); err != nil {
				return err
			}
			t.useKnown(it)
			if t.onFile != nil {
				t.onFile(it.Size)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return t.manifestBytes(), nil
}

// run is the contract Walk and copyInto share: the tree is walked once
// (by walk, given the Tree's options with a compact listing), carried
// files are checked, a failure is kept in walkErr and a success finishes
// the Tree.
func (t *Tree) run(walk func(opts tree.Options) (*tree.Result, error)) error {
	if t.walked {
		return errors.New("stage: a Tree can be walked only once")
	}
	t.walked, t.walking = true, true
	defer func() { t.walking = false }()
	t.settle()
	opts := t.opts
	opts.Compact, opts.Stamps = true, !t.stampsBefore.IsZero()
	res, err := walk(opts)
	if err == nil && len(t.carried) > 0 {
		err = t.checkCarried(res.Listing)
	}
	if err != nil {
		t.walkErr = err
		return err
	}
	t.finish(res)
	return nil
}

// useKnown lets the walk take a carried file's hash from the comparing
// walk instead of reading the file again, when the Target did not read it
// and the file still shows the stamp that walk took (see Item.UseKnown).
func (t *Tree) useKnown(it *tree.Item) {
	if k, ok := t.known[it.Path]; ok && t.carried[it.Path] != "" {
		it.UseKnown(k.sum, k.stamp)
	}
}

// knownSum is CopyHooks.Known for a carried file.
func (t *Tree) knownSum(e tree.Entry) ([32]byte, tree.Stamp, bool) {
	k, ok := t.known[e.Path]
	return k.sum, k.stamp, ok
}

// treeSum is what Stage reports of a walked tree.
type treeSum struct {
	digest  string
	files   int
	bytes   int64
	skipped []string
}

// finish keeps the compact listing and the counts of a successful walk:
// one compact copy of the manifest, from which its bytes are made when
// needed.
func (t *Tree) finish(res *tree.Result) {
	t.list = res.Listing
	if t.keep != nil { // set with stampsBefore (stager.publish)
		t.keepMu.Lock()
		if !t.waited {
			l, before, keep, kept := t.list, t.stampsBefore, t.keep, make(chan struct{})
			t.kept = kept
			go func() {
				defer close(kept)
				keep(stampsOf(l, before))
			}()
		}
		t.keepMu.Unlock()
	}
	t.sum = treeSum{files: t.list.Files(), bytes: t.list.Bytes(), skipped: res.Skipped}
	t.done = true
}

// waitKept waits for the stamps a finished walk handed to keep; a walk
// that finishes after it keeps none.
func (t *Tree) waitKept() {
	t.keepMu.Lock()
	t.waited = true
	kept := t.kept
	t.keepMu.Unlock()
	if kept != nil {
		<-kept
	}
}

// manifestBytes returns the canonical manifest of a finished walk, made
// once; the listing is let go.
func (t *Tree) manifestBytes() []byte {
	if t.manifest == nil && t.list != nil {
		t.manifest = t.list.Canonical()
		t.sum.digest = digest.Of(t.manifest)
		t.list = nil
	}
	return t.manifest
}

// digest returns the manifest digest of a finished walk.
func (t *Tree) digest() string {
	if t.sum.digest == "" && t.list != nil { // manifestBytes sets it when it makes the bytes
		t.sum.digest = t.list.Digest()
	}
	return t.sum.digest
}

// writeManifest writes the canonical manifest of a finished walk to w,
// streamed from the listing when the bytes were never made, and records
// its digest.
func (t *Tree) writeManifest(w io.Writer) error {
	if t.manifest != nil || t.list == nil {
		_, err := w.Write(t.manifestBytes())
		return err
	}
	d, err := t.list.WriteCanonical(w)
	if err == nil {
		t.sum.digest = d
	}
	return err
}

// checkCarried fails with ErrChanged when a carried file's content on the
// host is no longer what the sandbox's copy was checked against, or (with
// sameModes) its mode is no longer the one the carried copy keeps: a
// chmod since the compare would leave the copy with a mode its manifest
// does not give. The first such file in path order is named.
func (t *Tree) checkCarried(l *tree.Listing) error {
	bad, seen := "", 0
	l.EachFile(func(p []byte, perm fs.FileMode, _ int64, sum [32]byte, _ tree.Stamp) {
		want, ok := t.carried[string(p)]
		if !ok {
			return
		}
		seen++
		var hx [2 * len(sum)]byte
		hex.Encode(hx[:], sum[:])
		if bad == "" && (string(hx[:]) != want || t.sameModes && !t.sameMode(string(p), perm)) {
			bad = string(p)
		}
	})
	if bad == "" && seen != len(t.carried) {
		for p := range t.carried { // carried, yet not a file the walk read: cannot happen
			if _, _, ok := l.Sum(p); !ok && (bad == "" || p < bad) {
				bad = p
			}
		}
	}
	if bad != "" {
		return fmt.Errorf("%w: %s changed while it was staged (its unchanged copy was carried over from the sandbox)", ErrChanged, path.Join(t.src, bad))
	}
	return nil
}

type eofReader struct{}

// Read always returns io.EOF.
func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
