package workspace

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/airlockdev/airlock/internal/gitexec"
	"github.com/airlockdev/airlock/internal/owner"
)

// Every bundle is indexed into a quarantine object directory first (the
// way git's own receive-pack holds a push until it is accepted), a
// directory of the repository's object directory with the repository's
// objects as its alternate; nothing of it is in the repository's object
// store until it is accepted:
//
//   - A bundle that passes the strict fsck, whose new commits hold no path
//     under the runtime directory or matching Spec.Exclude, and whose
//     snapshot adds none: its pack moves into the repository as it is.
//   - New commits that hold such paths are rewritten in the quarantine
//     (see rewriteCommits); only the rewritten commits, and what they
//     reach, move into the repository, checked by the strict fsck again.
//     The snapshot is read through the quarantine.
//   - A bundle that fails the strict fsck is not thrown away whole: its
//     snapshot is read entry by entry under the usual rules (an entry git
//     would refuse is listed in Result.Refused, the rest is merged), and
//     its commits are moved into the repository only when they pass the
//     strict fsck on their own. Commits that fail are refused: the paths
//     git refuses in their trees are listed in Result.Refused, the local
//     HEAD stays, and their content still arrives through the snapshot,
//     as uncommitted edits.

// quarantinePrefix starts the name of a quarantine directory in the
// repository's object directory: airlock-quarantine-<owner>-<rand>.
const quarantinePrefix = "airlock-quarantine-"

// quarantineDir is a quarantine object directory.
type quarantineDir struct {
	dir string
	git *gitexec.Git // reads the repository's objects and the quarantine's, writes into the quarantine
}

// newQuarantine makes an empty quarantine in the repository's object
// directory objects.
func (r *Round) newQuarantine(objects string) (*quarantineDir, error) {
	dir := filepath.Join(objects, quarantinePrefix+owner.Tag()+"-"+strings.ToLower(rand.Text()[:12]))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, &fs.PathError{Op: "workspace.Restore", Path: dir, Err: err}
	}
	if err := os.Mkdir(filepath.Join(dir, "pack"), 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, &fs.PathError{Op: "workspace.Restore", Path: dir, Err: err}
	}
	return &quarantineDir{dir: dir, git: &gitexec.Git{Dir: r.git.Dir, Env: append(slices.Clone(r.git.Env),
		"GIT_OBJECT_DIRECTORY="+dir, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+objects)}}, nil
}

// reset empties the quarantine.
func (q *quarantineDir) reset() error {
	if err := os.RemoveAll(q.dir); err != nil {
		return err
	}
	if err := os.Mkdir(q.dir, 0o700); err != nil {
		return err
	}
	return os.Mkdir(filepath.Join(q.dir, "pack"), 0o700)
}

func (q *quarantineDir) remove() { os.RemoveAll(q.dir) }

// migrate moves the quarantine's packs into the object directory objects,
// each pack's index last (a pack is used only once its index is there).
func (q *quarantineDir) migrate(objects string) error {
	ents, err := os.ReadDir(filepath.Join(q.dir, "pack"))
	if err != nil {
		return err
	}
	rank := func(name string) int {
		switch {
		case strings.HasSuffix(name, ".pack"):
			return 0
		case strings.HasSuffix(name, ".idx"):
			return 2
		}
		return 1
	}
	slices.SortStableFunc(ents, func(a, b os.DirEntry) int { return rank(a.Name()) - rank(b.Name()) })
	if err := os.MkdirAll(filepath.Join(objects, "pack"), 0o755); err != nil {
		return fmt.Errorf("workspace: moving the sandbox's objects into %s: %w", objects, err)
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "pack-") {
			continue
		}
		src, dst := filepath.Join(q.dir, "pack", e.Name()), filepath.Join(objects, "pack", e.Name())
		err := os.Link(src, dst)
		switch {
		case err == nil, errors.Is(err, fs.ErrExist): // the same name is the same content
		default:
			if rerr := os.Rename(src, dst); rerr != nil {
				return fmt.Errorf("workspace: moving the sandbox's objects into %s: %w", objects, rerr)
			}
		}
	}
	return nil
}

// migrateAll moves every object of the quarantine into the object
// directory objects: the loose ones (each linked in under its name, an
// object already there being the same content), then the packs.
func (q *quarantineDir) migrateAll(objects string) error {
	ents, err := os.ReadDir(q.dir)
	if err != nil {
		return err
	}
	for _, d := range ents {
		if !d.IsDir() || len(d.Name()) != 2 || !hexDigits(d.Name()) {
			continue
		}
		objs, err := os.ReadDir(filepath.Join(q.dir, d.Name()))
		if err != nil {
			return err
		}
		for _, o := range objs {
			if !hexDigits(o.Name()) {
				continue // git's temporary file of an object it did not finish
			}
			if err := os.Mkdir(filepath.Join(objects, d.Name()), 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			src, dst := filepath.Join(q.dir, d.Name(), o.Name()), filepath.Join(objects, d.Name(), o.Name())
			if err := os.Link(src, dst); err != nil && !errors.Is(err, fs.ErrExist) {
				if rerr := os.Rename(src, dst); rerr != nil {
					return rerr
				}
			}
		}
	}
	return q.migrate(objects)
}

// hexDigits reports a non-empty name of lowercase hex digits only.
func hexDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789abcdef") == ""
}

// receiveHistory decides what of the quarantined bundle enters the
// repository (see above) and sets f's git, head and history; strict says
// the bundle passed the strict fsck.
func (r *Round) receiveHistory(ctx context.Context, q *quarantineDir, objects string, f *fetched, h header, hk hashKind, strict bool, res *Result) error {
	g := r.git
	fresh := h.Head != ""
	if fresh {
		fresh = g.Run(ctx, gitexec.Cmd{Args: []string{"cat-file", "-e", h.Head + "^{commit}"}}) != nil
	}
	var rw []Rewrite
	newHead := h.Head
	var ferr error
	if fresh {
		if rw, newHead, ferr = r.rewriteCommits(ctx, q, h.Head); ferr != nil {
			if strict || hostFailure(ferr) || ctx.Err() != nil {
				return ferr // commits git accepts that could not be rewritten here, or a write that failed: a host failure
			}
			newHead = h.Head
		}
	}
	if strict && ferr == nil && len(rw) == 0 {
		clean, err := r.snapshotClean(ctx, q.git, h.Snap, h.Index)
		if err != nil {
			return err
		}
		if clean {
			if err := q.migrate(objects); err != nil {
				return err
			}
			f.git, f.head, f.history = g, h.Head, true
			return r.pin(ctx, f, h.Snap, q.remove)
		}
	}
	if !fresh {
		f.head, f.history = h.Head, true
		return nil
	}
	if ferr == nil {
		if ferr = r.adoptCommits(ctx, q.git, newHead); ferr == nil {
			f.head, f.history = newHead, true
			res.Rewritten = rw
			return r.pin(ctx, f, newHead, f.cleanup)
		}
		if hostFailure(ferr) || ctx.Err() != nil {
			// The host could not store the commits: never a reason to
			// refuse them.
			return r.storeFailed(objects, ferr)
		}
	}
	bad, err := scanCommits(ctx, q.git, h.Head, hk, r.o.maxBytes)
	if err != nil {
		return err
	}
	for _, p := range bad {
		r.refuse(res, p, "a path git refuses in the sandbox's commits (not integrated; their work tree arrives as uncommitted edits)")
	}
	if len(bad) == 0 {
		r.refuse(res, "commit "+h.Head, "the sandbox's commits fail git fsck (not integrated): "+ferr.Error())
	}
	return nil
}

// pin points a private ref of this restore at commit, which keeps a gc
// from pruning it until f's cleanup, which then runs then.
func (r *Round) pin(ctx context.Context, f *fetched, commit string, then func()) error {
	g := r.git
	ref := "refs/airlock/restore/" + owner.Tag() + "/" + r.rec.ID + "-" + strings.ToLower(rand.Text()[:12])
	if err := g.Run(ctx, gitexec.Cmd{Args: []string{"update-ref", ref, commit, ""}}); err != nil {
		return fmt.Errorf("workspace: creating the private ref %s for %s: %w", ref, commit, err)
	}
	f.cleanup = func() {
		g.Run(context.WithoutCancel(ctx), gitexec.Cmd{Args: []string{"update-ref", "-d", ref}})
		then()
	}
	return nil
}

// snapshotClean reports whether the snapshot snap and the commit of the
// sandbox's index (index, "" for none), read through q, add or change no
// path under the runtime directory or matching Spec.Exclude against the
// baseline's work tree and index.
func (r *Round) snapshotClean(ctx context.Context, q *gitexec.Git, snap, index string) (bool, error) {
	pairs := [][2]string{{r.rec.Tree, snap}}
	if index != "" {
		pairs = append(pairs, [2]string{r.rec.Index, index})
	}
	for _, pr := range pairs {
		out, err := q.Output(ctx, "diff-tree", "-r", "-t", "-z", "--name-only", "--no-renames", pr[0], pr[1])
		if err != nil {
			return false, nil // the baseline is gone: applyGitFiles says so
		}
		for _, p := range strings.Split(string(out), "\x00") {
			if p != "" && excluded(r.rec.Exclude, p) {
				return false, nil
			}
		}
	}
	return true, nil
}

// rewriteCommits rewrites the commits up to head that the repository
// lacks (read through q) so that none holds a path under the runtime
// directory or matching Spec.Exclude: in each such commit those paths are
// set to what its first parent (as rewritten) holds there — gone for a
// path the agent added, as before for one the local history already had
// — and every commit above a rewritten one is rewritten with the new
// parents. Author, committer, dates, message and other headers are kept
// byte for byte; signatures (gpgsig, mergetag) are dropped, as they no
// longer match. The new objects are written into the quarantine. It
// returns the rewrites, oldest first, and head's new id (head when
// nothing was rewritten).
func (r *Round) rewriteCommits(ctx context.Context, q *quarantineDir, head string) ([]Rewrite, string, error) {
	strip := func(p string) bool { return excluded(r.rec.Exclude, p) }
	// One pass over every path the new commits change (against their
	// first parent) says whether any commit needs a rewrite at all.
	all, err := q.git.Output(ctx, "log", "--format=", "-z", "--name-only", "-t", "--no-renames", "--root", "--diff-merges=first-parent", head, "--not", "--all")
	if err != nil {
		return nil, "", fmt.Errorf("workspace: listing the paths of the sandbox's commits: %w", err)
	}
	if !slices.ContainsFunc(strings.Split(string(all), "\x00"), func(p string) bool { return p != "" && strip(p) }) {
		return nil, head, nil
	}
	out, err := q.git.Output(ctx, "rev-list", "--reverse", "--topo-order", "--parents", head, "--not", "--all")
	if err != nil {
		return nil, "", fmt.Errorf("workspace: listing the sandbox's commits: %w", err)
	}
	mapped := map[string]string{}
	var rw []Rewrite
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		ids := strings.Fields(l)
		if len(ids) == 0 {
			continue
		}
		c, parents := ids[0], slices.Clone(ids[1:])
		moved := false
		for i, p := range parents {
			if m, ok := mapped[p]; ok {
				parents[i], moved = m, true
			}
		}
		var names []byte
		if len(parents) > 0 {
			names, err = q.git.Output(ctx, "diff-tree", "-r", "-t", "-z", "--name-only", "--no-renames", parents[0], c)
		} else {
			names, err = q.git.Output(ctx, "ls-tree", "-r", "-t", "-z", "--name-only", "--full-tree", c)
		}
		if err != nil {
			return nil, "", fmt.Errorf("workspace: reading sandbox commit %s: %w", c, err)
		}
		touches := slices.ContainsFunc(strings.Split(string(names), "\x00"), func(p string) bool { return p != "" && strip(p) })
		if !touches && !moved {
			continue
		}
		t := ""
		if touches {
			base := ""
			if len(parents) > 0 {
				base = parents[0]
			}
			if t, err = r.strippedTree(ctx, q, c, base, strip); err != nil {
				return nil, "", err
			}
		} else if t, err = q.git.Line(ctx, "rev-parse", c+"^{tree}"); err != nil {
			return nil, "", err
		}
		raw, err := q.git.Output(ctx, "cat-file", "commit", c)
		if err != nil {
			return nil, "", fmt.Errorf("workspace: reading sandbox commit %s: %w", c, err)
		}
		obj, err := recommit(raw, t, parents)
		if err != nil {
			return nil, "", fmt.Errorf("workspace: sandbox commit %s: %w", c, err)
		}
		var id bytes.Buffer
		if err := q.git.Run(ctx, gitexec.Cmd{Args: []string{"hash-object", "-t", "commit", "-w", "--stdin"}, Stdin: bytes.NewReader(obj), Stdout: &id}); err != nil {
			return nil, "", fmt.Errorf("workspace: writing the rewrite of sandbox commit %s: %w", c, err)
		}
		nc := strings.TrimSpace(id.String())
		mapped[c] = nc
		rw = append(rw, Rewrite{Old: c, New: nc})
	}
	if m, ok := mapped[head]; ok {
		return rw, m, nil
	}
	return rw, head, nil
}

// strippedTree writes (into q) the tree of commit c without the paths
// strip selects, with those of base (a commit, "" for none) instead.
func (r *Round) strippedTree(ctx context.Context, q *quarantineDir, c, base string, strip func(string) bool) (string, error) {
	list := func(commit string) ([]string, error) {
		out, err := q.git.Output(ctx, "ls-tree", "-r", "-z", "--full-tree", commit)
		if err != nil {
			return nil, fmt.Errorf("workspace: reading the tree of %s: %w", commit, err)
		}
		return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"), nil
	}
	pathOf := func(rec string) string { _, p, _ := strings.Cut(rec, "\t"); return p }
	ents, err := list(c)
	if err != nil {
		return "", err
	}
	var in bytes.Buffer
	kept := map[string]bool{}
	for _, e := range ents {
		if p := pathOf(e); p != "" && !strip(p) {
			kept[p] = true
			in.WriteString(e + "\x00")
		}
	}
	if base != "" {
		bents, err := list(base)
		if err != nil {
			return "", err
		}
	next:
		for _, e := range bents {
			p := pathOf(e)
			if p == "" || !strip(p) {
				continue
			}
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				if kept[d] {
					continue next // a file of c where base has a directory
				}
			}
			in.WriteString(e + "\x00")
		}
	}
	idx := filepath.Join(q.dir, "rewrite.index")
	os.Remove(idx)
	defer os.Remove(idx)
	env := []string{"GIT_INDEX_FILE=" + idx}
	if err := q.git.Run(ctx, gitexec.Cmd{Args: []string{"update-index", "-z", "--index-info"}, Env: env, Stdin: &in}); err != nil {
		return "", fmt.Errorf("workspace: rewriting the tree of sandbox commit %s: %w", c, err)
	}
	var t bytes.Buffer
	if err := q.git.Run(ctx, gitexec.Cmd{Args: []string{"write-tree"}, Env: env, Stdout: &t}); err != nil {
		return "", fmt.Errorf("workspace: rewriting the tree of sandbox commit %s: %w", c, err)
	}
	return strings.TrimSpace(t.String()), nil
}

// recommit returns the raw commit object raw with its tree and parents
// replaced and its signatures (gpgsig, gpgsig-sha256, mergetag) dropped;
// every other header and the message stay byte for byte.
func recommit(raw []byte, tree string, parents []string) ([]byte, error) {
	hdr, msg, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		return nil, errors.New("a commit without the blank line after its headers")
	}
	var b bytes.Buffer
	b.WriteString("tree " + tree + "\n")
	for _, p := range parents {
		b.WriteString("parent " + p + "\n")
	}
	skip := false
	for _, l := range bytes.Split(hdr, []byte("\n")) {
		if len(l) > 0 && l[0] == ' ' { // a continuation of the header above
			if !skip {
				b.Write(l)
				b.WriteByte('\n')
			}
			continue
		}
		name, _, _ := bytes.Cut(l, []byte(" "))
		switch string(name) {
		case "tree", "parent", "gpgsig", "gpgsig-sha256", "mergetag":
			skip = true
			continue
		}
		skip = false
		b.Write(l)
		b.WriteByte('\n')
	}
	b.WriteString("\n")
	b.Write(msg)
	return b.Bytes(), nil
}

// indexPack stores the pack that follows bundle's header, under git's
// object directory. A bundle the host cannot open or read is an
// *fs.PathError.
func indexPack(ctx context.Context, g *gitexec.Git, bundle string, args ...string) error {
	f, err := os.Open(bundle)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	// The header ends at the first empty line; it was parsed by git
	// (verify, list-heads) already, so only its end is looked for here.
	for i := 0; ; i++ {
		l, err := br.ReadSlice('\n')
		if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
			return &fs.PathError{Op: "read", Path: bundle, Err: err} // the host's copy could not be read
		}
		if err != nil || i > 100000 {
			return fmt.Errorf("%w: the sandbox's bundle header does not end", ErrHostile)
		}
		if len(l) == 1 {
			break
		}
	}
	return g.Run(ctx, gitexec.Cmd{Args: append([]string{"index-pack", "--stdin", "--fix-thin"}, args...), Stdin: br, Stdout: io.Discard})
}

// adoptCommits moves the commits up to head that the repository lacks,
// with everything they reach, from the quarantine q into the repository,
// checked by the strict fsck; nothing moves when the check fails.
func (r *Round) adoptCommits(ctx context.Context, q *gitexec.Git, head string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	list, listW := io.Pipe()
	listed := make(chan error, 1)
	go func() {
		err := q.Run(ctx, gitexec.Cmd{Args: []string{"rev-list", "--objects", "--no-object-names", head, "--not", "--all"}, Stdout: listW})
		listW.CloseWithError(err)
		listed <- err
	}()
	err := r.packInto(ctx, q, list)
	list.CloseWithError(errStop) // a rev-list still writing stops
	if err != nil {
		cancel()
		<-listed
		return err
	}
	if e := <-listed; e != nil && !errors.Is(e, errStop) {
		return e
	}
	return nil
}

// packInto packs the objects list names (one id a line) out of from and
// indexes the pack into the repository with index-pack --strict, so that
// nothing enters it that the strict fsck refuses.
func (r *Round) packInto(ctx context.Context, from *gitexec.Git, list io.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pack, packW := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		err := from.Run(ctx, gitexec.Cmd{Args: []string{"pack-objects", "--stdout", "-q"}, Stdin: list, Stdout: packW})
		packW.CloseWithError(err)
		packed <- err
	}()
	err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"index-pack", "--stdin", "--strict"}, Stdin: pack, Stdout: io.Discard})
	if err != nil {
		cancel()
	}
	pack.CloseWithError(errStop)
	if perr := <-packed; err == nil && perr != nil && !errors.Is(perr, errStop) {
		err = perr
	}
	return err
}

// maxRefused bounds the paths one scan lists.
const maxRefused = 1000

// scanCommits walks the trees of the commits up to head that the
// repository lacks (read through q) and returns the paths that git's fsck
// refuses by name: those with a component that is empty, ".", "..", holds
// a slash, or is read as .git (isDotGit), listed down to their files as a diff
// of the snapshot lists them. Only trees new to the repository are read.
func scanCommits(ctx context.Context, q *gitexec.Git, head string, hk hashKind, limit int64) ([]string, error) {
	out, err := q.Output(ctx, "rev-list", "--objects", "--no-object-names", head, "--not", "--all")
	if err != nil {
		return nil, err
	}
	fresh := map[string]bool{}
	for _, id := range strings.Fields(string(out)) {
		fresh[id] = true
	}
	roots, err := q.Output(ctx, "rev-list", "--no-commit-header", "--format=%T", head, "--not", "--all")
	if err != nil {
		return nil, err
	}
	type node struct {
		id, path string
		bad      bool // the path already holds a refused name
	}
	var level []node
	seen := map[string]bool{}
	for _, id := range strings.Fields(string(roots)) {
		if !seen[id] {
			seen[id] = true
			level = append(level, node{id: id})
		}
	}
	var bad []string
	for len(level) > 0 && len(bad) < maxRefused {
		ids := make([]string, len(level))
		for i, n := range level {
			ids[i] = n.id
		}
		trees, err := catTrees(ctx, q, ids, &limit)
		if err != nil {
			return nil, err
		}
		var next []node
		for i, n := range level {
			ents, err := parseTree(trees[i], hk.idLen())
			if err != nil {
				return nil, fmt.Errorf("%w: tree %s of the sandbox's commits: %w", ErrHostile, n.id, err)
			}
			for _, e := range ents {
				p := e.name // as named, never cleaned
				if n.path != "" {
					p = n.path + "/" + e.name
				}
				isBad := n.bad || refusedName(e.name)
				switch {
				case e.mode == "40000" && fresh[e.id] && !seen[e.id]:
					seen[e.id] = true
					next = append(next, node{e.id, p, isBad})
				case isBad:
					bad = append(bad, p)
				}
			}
		}
		level = next
	}
	slices.Sort(bad)
	bad = slices.Compact(bad)
	if len(bad) > maxRefused {
		bad = bad[:maxRefused]
	}
	return bad, nil
}

// refusedName reports a tree entry name that git's fsck refuses by name.
func refusedName(name string) bool {
	return name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || isDotGit(name)
}

// idLen is the length in bytes of a raw object id.
func (k hashKind) idLen() int {
	if k == hashGitSHA256 {
		return 32
	}
	return 20
}

// catTrees reads the tree objects ids through one git cat-file --batch;
// their sizes together may not pass *limit, which shrinks by what is read.
func catTrees(ctx context.Context, g *gitexec.Git, ids []string, limit *int64) ([][]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := g.Run(ctx, gitexec.Cmd{Args: []string{"cat-file", "--batch"}, Stdin: strings.NewReader(strings.Join(ids, "\n") + "\n"), Stdout: pw})
		pw.CloseWithError(err)
		done <- err
	}()
	br := bufio.NewReaderSize(pr, 64<<10)
	out := make([][]byte, 0, len(ids))
	var ferr error
	for _, id := range ids {
		hl, err := br.ReadString('\n')
		if err != nil {
			ferr = fmt.Errorf("workspace: reading tree %s: %w", id, err)
			break
		}
		f := strings.Fields(hl)
		size := int64(-1)
		if len(f) == 3 {
			size, _ = strconv.ParseInt(f[2], 10, 64)
		}
		if len(f) != 3 || f[0] != id || f[1] != "tree" || size < 0 {
			ferr = fmt.Errorf("%w: object %s is %.80q, not a tree", ErrHostile, id, strings.TrimSpace(hl))
			break
		}
		if size > *limit {
			ferr = fmt.Errorf("%w: the trees of the sandbox's commits are larger than %d bytes: raise WithMaxBytes", ErrTooLarge, *limit)
			break
		}
		*limit -= size
		b := make([]byte, size+1)
		if _, err := io.ReadFull(br, b); err != nil {
			ferr = fmt.Errorf("workspace: reading tree %s: %w", id, err)
			break
		}
		out = append(out, b[:size])
	}
	if ferr != nil {
		cancel()
	}
	pr.CloseWithError(errStop)
	gerr := <-done
	if ferr != nil {
		return nil, ferr
	}
	if gerr != nil && !errors.Is(gerr, errStop) {
		return nil, gerr
	}
	return out, nil
}

// treeEntry is one entry of a git tree object.
type treeEntry struct {
	mode, name, id string // id in lowercase hex
}

// parseTree decodes a git tree object: entries "<octal mode> <name>\0<raw
// id>", the id idLen bytes long. Names are returned as stored, for the
// caller to judge; a mode that is not octal digits, a missing separator
// or a short id is an error.
func parseTree(data []byte, idLen int) ([]treeEntry, error) {
	var ents []treeEntry
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		if sp <= 0 || sp > 6 {
			return nil, errors.New("an entry without a mode")
		}
		mode := string(data[:sp])
		if strings.Trim(mode, "01234567") != "" {
			return nil, fmt.Errorf("mode %q is not octal", mode)
		}
		data = data[sp+1:]
		nul := bytes.IndexByte(data, 0)
		if nul < 0 || len(data)-nul-1 < idLen {
			return nil, errors.New("an entry without a name or object id")
		}
		ents = append(ents, treeEntry{mode: mode, name: string(data[:nul]), id: fmt.Sprintf("%x", data[nul+1:nul+1+idLen])})
		data = data[nul+1+idLen:]
	}
	return ents, nil
}
