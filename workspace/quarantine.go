package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/airlockdev/airlock/internal/gitexec"
)

// A bundle that fails the strict fsck is not thrown away whole: its pack
// goes into a quarantine object directory (the way git's own receive-pack
// holds a push until it is accepted), where the sandbox's work tree
// snapshot is read entry by entry under the usual rules (an entry git
// would refuse is listed in Result.Refused, the rest is merged), and its
// commits are moved into the repository only when they pass the strict
// fsck on their own. Commits that fail are refused: the paths git refuses
// in their trees are listed in Result.Refused, the local HEAD stays, and
// their content still arrives through the snapshot, as uncommitted edits.

// quarantine indexes bundle's pack into a fresh object directory under
// the round's state directory, with the repository's objects as its
// alternate, and returns the fetched snapshot read through it. The
// sandbox's commits up to head (its HEAD, "" when unborn) are moved into
// the repository when they pass the strict fsck; else they are refused
// and fetched.history is false.
func (r *Round) quarantine(ctx context.Context, bundle, head string, hk hashKind, res *Result) (_ *fetched, err error) {
	objects, err := r.git.Line(ctx, "rev-parse", "--path-format=absolute", "--git-path", "objects")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(r.state, "quarantine-")
	if err != nil {
		return nil, err
	}
	f := &fetched{cleanup: func() { os.RemoveAll(dir) }}
	defer func() {
		if err != nil {
			f.cleanup()
		}
	}()
	if err := os.Mkdir(filepath.Join(dir, "pack"), 0o700); err != nil {
		return nil, err
	}
	f.git = &gitexec.Git{Dir: r.git.Dir, Env: append(slices.Clone(r.git.Env),
		"GIT_OBJECT_DIRECTORY="+dir, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+objects)}
	if err := indexPack(ctx, f.git, bundle); err != nil {
		return nil, fmt.Errorf("%w: the sandbox's bundle holds no valid pack: %w", ErrHostile, err)
	}
	if head == "" {
		f.history = true
		return f, nil
	}
	if err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"cat-file", "-e", head + "^{commit}"}}); err == nil {
		f.history = true // no new commits: nothing to move
		return f, nil
	}
	ferr := r.adoptCommits(ctx, f.git, head)
	if ferr == nil {
		f.history = true
		return f, nil
	}
	bad, err := scanCommits(ctx, f.git, head, hk, r.o.maxBytes)
	if err != nil {
		return nil, err
	}
	for _, p := range bad {
		r.refuse(res, p, "a path git refuses in the sandbox's commits (not integrated; their work tree arrives as uncommitted edits)")
	}
	if len(bad) == 0 {
		r.refuse(res, "commit "+head, "the sandbox's commits fail git fsck (not integrated): "+ferr.Error())
	}
	return f, nil
}

// indexPack stores the pack that follows bundle's header, under git's
// object directory.
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
	pack, packW := io.Pipe()
	errs := make(chan error, 2)
	go func() {
		err := q.Run(ctx, gitexec.Cmd{Args: []string{"rev-list", "--objects", "--no-object-names", head, "--not", "--all"}, Stdout: listW})
		listW.CloseWithError(err)
		errs <- err
	}()
	go func() {
		err := q.Run(ctx, gitexec.Cmd{Args: []string{"pack-objects", "--stdout", "-q"}, Stdin: list, Stdout: packW})
		list.CloseWithError(errStop)
		packW.CloseWithError(err)
		errs <- err
	}()
	err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"index-pack", "--stdin", "--strict"}, Stdin: pack, Stdout: io.Discard})
	if err != nil {
		cancel()
	}
	pack.CloseWithError(errStop)
	e1, e2 := <-errs, <-errs
	if err != nil {
		return err
	}
	for _, e := range []error{e1, e2} {
		if e != nil && !errors.Is(e, errStop) {
			return e
		}
	}
	return nil
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
