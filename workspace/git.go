package workspace

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/airlockdev/airlock/internal/gitexec"
	"github.com/airlockdev/airlock/internal/owner"
	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/tree"
	"github.com/airlockdev/airlock/sandbox"
)

// openRepo returns a git runner for local when it is the top of a git work
// tree, and nil for a plain directory.
func openRepo(ctx context.Context, dir string) (*gitexec.Git, string, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, "", &fs.PathError{Op: "workspace", Path: dir, Err: fmt.Errorf("%w: Spec.Local must be an existing directory, not a link: %v", ErrSpec, err)}
	}
	if !fi.IsDir() {
		return nil, "", &fs.PathError{Op: "workspace", Path: dir, Err: fmt.Errorf("%w: Spec.Local must be an existing directory, not a link: it is a %v", ErrSpec, fi.Mode().Type())}
	}
	g := &gitexec.Git{Dir: dir}
	out, err := g.Output(ctx, "rev-parse", "--is-bare-repository", "--show-toplevel", "--absolute-git-dir")
	if errors.Is(err, gitexec.ErrNotFound) {
		if _, serr := os.Lstat(filepath.Join(dir, ".git")); serr == nil {
			return nil, "", &ToolError{Tool: "git", Where: "host", Need: fmt.Sprintf("%d.%d", minHostGitMajor, minHostGitMinor)}
		}
		return nil, "", nil
	}
	if err != nil {
		if gitexec.Status(err) == 128 {
			if _, serr := os.Lstat(filepath.Join(dir, ".git")); serr != nil {
				return nil, "", nil // not a repository: a plain directory
			}
		}
		return nil, "", fmt.Errorf("%w: %s: %w", ErrRepo, dir, err)
	}
	f := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(f) != 3 || f[0] != "false" {
		return nil, "", fmt.Errorf("%w: %s is not the work tree of a non-bare repository", ErrRepo, dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, "", &fs.PathError{Op: "workspace", Path: dir, Err: err}
	}
	if f[1] != real {
		return nil, "", fmt.Errorf("%w: %s is inside the work tree %s; pass its top as Spec.Local", ErrRepo, dir, f[1])
	}
	v, err := g.Line(ctx, "version")
	if err != nil {
		return nil, "", err
	}
	if maj, min, ok := gitexec.ParseVersion(v); !ok || maj < minHostGitMajor || (maj == minHostGitMajor && min < minHostGitMinor) {
		return nil, "", &ToolError{Tool: "git", Where: "host", Have: strings.TrimPrefix(v, "git version "), Need: fmt.Sprintf("%d.%d", minHostGitMajor, minHostGitMinor)}
	}
	return g, f[2], nil
}

func (r *Round) identEnv() []string {
	return []string{"GIT_AUTHOR_NAME=" + r.o.name, "GIT_AUTHOR_EMAIL=" + r.o.email,
		"GIT_COMMITTER_NAME=" + r.o.name, "GIT_COMMITTER_EMAIL=" + r.o.email}
}

func (r *Round) guestEnv() map[string]string {
	return map[string]string{"GIT_AUTHOR_NAME": r.o.name, "GIT_AUTHOR_EMAIL": r.o.email,
		"GIT_COMMITTER_NAME": r.o.name, "GIT_COMMITTER_EMAIL": r.o.email}
}

// pathspecs limit the host's snapshot to what is synced: never a
// restore's temporary file either.
func pathspecs(exclude []string) []string {
	return append(sandboxPathspecs(exclude), ":(exclude,glob)**/"+tmpPrefix+"[0-9]*.[0-9]*-*")
}

// notThroughLinks is exclude less the patterns whose leading directories
// run through a symbolic link in the work tree at root: git add refuses
// such a pathspec ("beyond a symbolic link"), and it could match nothing
// git add would take (git does not walk through a link).
func notThroughLinks(root string, exclude []string) []string {
	var keep []string
	for _, p := range exclude {
		comps := strings.Split(p, "/")
		through := false
		for i := range len(comps) - 1 {
			if strings.ContainsAny(comps[i], "*?[\\") {
				break
			}
			fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(strings.Join(comps[:i+1], "/"))))
			if err == nil && fi.Mode().Type() == fs.ModeSymlink {
				through = true
				break
			}
		}
		if !through {
			keep = append(keep, p)
		}
	}
	return keep
}

// stagedExcluded reports whether the index (env names it) holds at an
// excluded path anything HEAD (head, "" when unborn) does not: a diff of
// the index against the tree, which reads no file.
func (r *Round) stagedExcluded(ctx context.Context, env []string, head string) (bool, error) {
	if head == "" {
		var out bytes.Buffer
		err := r.git.Run(ctx, gitexec.Cmd{Args: append([]string{"ls-files"}, excludedPathspecs(r.spec.Exclude)...), Env: env, Stdout: &out})
		return out.Len() > 0, err
	}
	err := r.git.Run(ctx, gitexec.Cmd{Args: append([]string{"diff-index", "--cached", "--quiet", head}, excludedPathspecs(r.spec.Exclude)...), Env: env})
	if gitexec.Status(err) == 1 {
		return true, nil
	}
	return false, err
}

// excludedPathspecs match what is never synced: the runtime directory
// and each Spec.Exclude pattern (as sandboxPathspecs leaves them out).
func excludedPathspecs(exclude []string) []string {
	ps := []string{"--", ":(literal)" + sandbox.RuntimeDir}
	for _, p := range exclude {
		ps = append(ps, globAndBelow(":(glob)", p)...)
	}
	return ps
}

// globAndBelow is the pathspecs (with magic) that match the paths glob
// pattern p matches and everything below them. git matches a pattern
// without wildcards against a path's leading directories too, so p alone
// does; a pattern with wildcards is matched against whole paths only, and
// needs p/** beside it. p/** is not given where p alone does: git add
// refuses a pathspec whose literal part runs through a symbolic link
// ("beyond a symbolic link"), and an excluded name that is a link is one
// users have (an outside tester's Spec.Exclude of a linked secrets
// directory failed every Prepare).
func globAndBelow(magic, p string) []string {
	if !strings.ContainsAny(p, "*?[\\") {
		return []string{magic + p}
	}
	return []string{magic + p, magic + p + "/**"}
}

// sandboxPathspecs limit the sandbox's snapshot to what is synced (a
// sandbox entry named like a temporary file is taken, and refused).
func sandboxPathspecs(exclude []string) []string {
	ps := []string{"--", ".", ":(exclude)" + sandbox.RuntimeDir}
	for _, p := range exclude {
		ps = append(ps, globAndBelow(":(exclude,glob)", p)...)
	}
	return ps
}

// copyIndex copies the user's index file (read through tree) to dst.
func copyIndex(gitDir, dst string) error {
	f, err := tree.OpenFile(gitDir, "index")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, f)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The copy keeps the index's modification time: git trusts an entry's
	// cached stat data only when the file is older than the index, so a
	// copy with a fresh time would hide an edit made in the same second
	// (the racy-git problem).
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}

func (r *Round) prepareGit(ctx context.Context, gitDir string) (err error) {
	g, id := r.git, r.rec.ID
	pr, err := r.probe(ctx)
	if err != nil {
		return err
	}
	if err := checkTools(pr, true); err != nil {
		return err
	}
	if err := r.checkOverlap(ctx, pr); err != nil {
		return err
	}
	head, err := g.Line(ctx, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if err != nil && gitexec.Status(err) != 1 {
		return err
	}
	branch, err := g.Line(ctx, "symbolic-ref", "-q", "HEAD")
	if err != nil && gitexec.Status(err) != 1 {
		return err
	}
	if head == "" && branch == "" {
		return fmt.Errorf("%w: %s has neither a commit nor a branch at HEAD", ErrRepo, r.spec.Local)
	}
	// History travels whole, and a shallow clone's stops at its graft
	// line: the sandbox would find the bundle incomplete, and preparing
	// again cannot help (an outside tester's finding).
	if shallow, err := g.Line(ctx, "rev-parse", "--is-shallow-repository"); err == nil && shallow == "true" {
		return fmt.Errorf("%w: %s is a shallow clone, whose history stops short; a round carries the whole history: fetch the rest (git fetch --unshallow) and prepare again", ErrRepo, r.spec.Local)
	}
	if err := os.MkdirAll(r.state, 0o700); err != nil {
		return &fs.PathError{Op: "workspace.Prepare", Path: r.state, Err: err}
	}
	r.sweepLeftovers(ctx, false)
	tmpIdx := filepath.Join(r.state, "tmp-"+owner.Tag()+"-"+id+".index")
	defer os.Remove(tmpIdx)
	if err := copyIndex(gitDir, tmpIdx); err != nil {
		return fmt.Errorf("workspace: copying the index of %s: %w", r.spec.Local, err)
	}
	// The snapshot's objects are written into a quarantine of the object
	// directory and moved into it once all are written: a Prepare that
	// fails (a full disk, a kill) leaves none of them, nor git's
	// temporary files (tmp_obj_*), behind.
	objects, err := g.Line(ctx, "rev-parse", "--path-format=absolute", "--git-path", "objects")
	if err != nil {
		return err
	}
	q, err := r.newQuarantine(objects)
	if err != nil {
		return err
	}
	defer q.remove()
	ienv := []string{"GIT_INDEX_FILE=" + tmpIdx, "GIT_OBJECT_DIRECTORY=" + q.dir, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + objects}
	var unmerged bytes.Buffer
	if err := g.Run(ctx, gitexec.Cmd{Args: []string{"ls-files", "-u", "-z"}, Env: ienv, Stdout: &unmerged}); err != nil {
		return err
	}
	if unmerged.Len() > 0 {
		return fmt.Errorf("%w: %s has unmerged paths; finish or abort the merge first", ErrRepo, r.spec.Local)
	}
	// Each step writes into the repository (objects, the temporary
	// index): a failure says where, and what to do.
	line := func(what string, args ...string) (string, error) {
		var out bytes.Buffer
		if err := g.Run(ctx, gitexec.Cmd{Args: args, Env: append(ienv, r.identEnv()...), Stdout: &out}); err != nil {
			return "", r.snapshotFailed(what, err)
		}
		return strings.TrimSpace(out.String()), nil
	}
	// What the user staged under an excluded path never travels: the
	// snapshot's index holds there what HEAD holds (committed history
	// travels whole), or nothing; the user's own index keeps it.
	if staged, err := r.stagedExcluded(ctx, ienv, head); err != nil {
		return r.snapshotFailed("comparing excluded paths of the index with HEAD", err)
	} else if staged { // rare: git reset refreshes the whole index
		if _, err := line("leaving excluded paths out of the index", append([]string{"reset", "-q"}, excludedPathspecs(r.spec.Exclude)...)...); err != nil {
			return err
		}
	}
	idxTree, err := line("recording the index", "write-tree")
	if err != nil {
		return err
	}
	ex, err := r.userExcludes(ctx)
	if err != nil {
		return err
	}
	if err := g.Run(ctx, gitexec.Cmd{Args: append(append(ex, "add", "-A", "--ignore-errors"), pathspecs(notThroughLinks(r.spec.Local, r.spec.Exclude))...), Env: ienv}); err != nil {
		return r.snapshotFailed("snapshotting the work tree", err)
	}
	wtTree, err := line("recording the work tree", "write-tree")
	if err != nil {
		return err
	}
	parent := []string{}
	if head != "" {
		parent = []string{"-p", head}
	}
	x, err := line("committing the index", append(append([]string{"commit-tree", idxTree}, parent...), "-m", "airlock: index of round "+id)...)
	if err != nil {
		return err
	}
	snap, err := line("committing the work tree", append(append([]string{"commit-tree", wtTree}, parent...), "-p", x, "-m", "airlock: work tree of round "+id)...)
	if err != nil {
		return err
	}
	if err := q.migrateAll(objects); err != nil {
		return r.snapshotFailed("moving the snapshot's objects into place", err)
	}
	r.rec.Branch, r.rec.Head, r.rec.Snap, r.rec.Tree, r.rec.Index = branch, head, snap, wtTree, idxTree

	// Commits the sandbox already holds need not travel.
	known, err := r.knownCommits(ctx, pr.Have)
	if err != nil {
		return err
	}
	// The marker says the round is not prepared yet: a host killed
	// before Prepare returns leaves a round no caller knows, which the
	// next sweep removes with it.
	mark := filepath.Join(r.state, "prep-"+owner.Tag()+"-"+id)
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		return &fs.PathError{Op: "workspace.Prepare", Path: mark, Err: err}
	}
	defer os.Remove(mark)
	if err := r.saveState(ctx); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			r.dropState()
		}
	}()
	err = r.shipGit(ctx, known)
	var ee *sandbox.ExitError
	if len(known) > 0 && ctx.Err() == nil && errors.As(err, &ee) && thinFailed(ee.Status) {
		// The sandbox lacks objects of commits its refs name (an objects
		// directory emptied or cut short): send the whole history.
		r.o.log.Warn("the sandbox repository lacks objects of the history it claims; sending the whole history", "round", id, "error", err)
		err = r.shipGit(ctx, nil)
	}
	return err
}

// userExcludes returns the option that gives Prepare's snapshot the
// user's own core.excludesFile, set in the global or system configuration
// that host git otherwise ignores: a file the user's git ignores (a
// secret in a global ignore list) never travels to the sandbox. Without
// one, git's default (~/.config/git/ignore) applies as it is.
func (r *Round) userExcludes(ctx context.Context) ([]string, error) {
	var out bytes.Buffer
	err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"config", "--type=path", "--get", "core.excludesFile"}, Stdout: &out, UserConfig: true})
	if gitexec.Status(err) == 1 { // not set
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workspace: reading the user's core.excludesFile (git config): %w", err)
	}
	// Set, even to nothing (which turns git's default file off).
	return []string{"-c", "core.excludesFile=" + strings.TrimSuffix(out.String(), "\n")}, nil
}

// snapshotFailed is the error of Prepare's step what (git, writing
// objects and a temporary index into the repository) that failed with
// err; Prepare adds what to do when it is the host's failure.
func (r *Round) snapshotFailed(what string, err error) error {
	return fmt.Errorf("workspace: %s of %s (writing into %s): %w", what, r.spec.Local, r.gitDir, err)
}

// knownCommits returns those of have that are commits in the local
// repository.
func (r *Round) knownCommits(ctx context.Context, have []string) ([]string, error) {
	if len(have) == 0 {
		return nil, nil
	}
	var out bytes.Buffer
	in := strings.Join(have, "\n") + "\n"
	if err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"cat-file", "--batch-check=%(objectname) %(objecttype)"}, Stdin: strings.NewReader(in), Stdout: &out}); err != nil {
		return nil, err
	}
	var known []string
	for _, l := range strings.Split(out.String(), "\n") {
		if name, ok := strings.CutSuffix(l, " commit"); ok && shell.IsObjectName(name) && !slices.Contains(known, name) {
			known = append(known, name)
		}
	}
	return known, nil
}

func (r *Round) shipGit(ctx context.Context, known []string) error {
	g, id := r.git, r.rec.ID
	snap := r.rec.Snap
	needBundle := !slices.Contains(known, snap)
	hk, err := r.hashKind(ctx) // the sandbox's new repository gets the local object format
	if err != nil {
		return err
	}
	format := ""
	if hk == hashGitSHA256 {
		format = "sha256"
	}
	tmpRef := "refs/airlock/tmp/" + owner.Tag() + "/" + id + "/snap"
	var stdin io.Reader
	var bundleErr chan error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sent countWriter
	if needBundle {
		if err := g.Run(ctx, gitexec.Cmd{Args: []string{"update-ref", "-m", "airlock: temporary", tmpRef, snap, ""}}); err != nil {
			return fmt.Errorf("workspace: creating temporary ref %s: %w", tmpRef, err)
		}
		defer g.Run(context.WithoutCancel(ctx), gitexec.Cmd{Args: []string{"update-ref", "-d", tmpRef}})
		revs := tmpRef + "\n"
		for _, k := range known {
			revs += "^" + k + "\n"
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			return err
		}
		defer pr.Close()
		bundleErr = make(chan error, 1)
		go func() {
			err := g.Run(ctx, gitexec.Cmd{Args: []string{"bundle", "create", "-", "--stdin"}, Stdin: strings.NewReader(revs), Stdout: io.MultiWriter(pw, &sent)})
			pw.Close()
			if err != nil {
				cancel()
			}
			bundleErr <- err
		}()
		stdin = pr
	}
	script := shell.GitPrepareScript(shell.GitPrepare{Remote: r.spec.Remote, ID: id, Branch: r.rec.Branch, Head: r.rec.Head,
		Snap: snap, Index: r.rec.Index, TmpRef: tmpRef, Bundle: needBundle, ObjectFormat: format, Exclude: r.spec.Exclude, Turn: r.prepareTurn()})
	r.o.report(sandbox.Progress{Asset: "prepare"})
	err = prepareLocked(runGuest(ctx, r.spec.Runner, "preparing the sandbox work tree "+r.spec.Remote, sandbox.Command{Script: script, Env: r.guestEnv(), Stdin: stdin}, nil))
	if needBundle && err != nil {
		// Nobody reads the bundle any more: stop its writer.
		cancel()
		stdin.(*os.File).Close()
	}
	if needBundle {
		if berr := <-bundleErr; berr != nil && err == nil {
			err = fmt.Errorf("workspace: writing the bundle for %s: %w", r.spec.Remote, berr)
		}
	}
	if err != nil {
		return err
	}
	r.o.report(sandbox.Progress{Asset: "prepare", Bytes: sent.n, TotalBytes: sent.n})
	return nil
}

// thinFailed reports whether a prepare script that took a thin bundle
// (one that leaves out what the sandbox's commits hold) exited with a
// status that a sandbox lacking objects of those commits gives: the
// bundle's prerequisites missing (14), its pack not resolving against them
// or the snapshot's objects incomplete (15), the checkout missing a blob
// (18). The whole history then goes instead.
func thinFailed(status int) bool { return status == 14 || status == 15 || status == 18 }

type countWriter struct{ n int64 }

// Write discards p and adds its length to n.
func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// restoreScript streams the sandbox's work tree back
// (shell.GitRestoreScript), limited to what the round syncs. tok names
// this run's scratch files and ref in the sandbox, so that it never meets
// those of an earlier run still going there (its host was cut off, the
// command was not). have are commits the local repository holds (see
// haveCommits).
func (r *Round) restoreScript(tok string, have []string) string {
	return shell.GitRestoreScript(r.spec.Remote, r.rec.ID, tok, r.rec.Index, !r.baseMoved(), sandboxPathspecs(r.rec.Exclude), have)
}

// haveCommits lists the local HEAD and the commits before it, newest
// first, up to 32: the sandbox leaves those it holds out of its bundle
// with all they reach. An earlier Restore of the round brought the
// sandbox's commits into this history (HEAD, or a parent of the merge
// commit), so a later one sends only what came since; before, every
// Restore carried all the round's commits again (an outside tester's
// repository grew by a full copy of them at each Restore, and a restore
// retried after a full disk needed twice the room). An unborn HEAD has
// none; a failure lists none (the bundle is then whole, as before).
func (r *Round) haveCommits(ctx context.Context) []string {
	out, err := r.git.Output(ctx, "rev-list", "--max-count=32", "HEAD", "--")
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// isOutRef reports whether ref is the one a restore run (tok) bundles the
// sandbox's snapshot under: refs/airlock/out/<id>/<the shell's pid>-<tok>/snap.
func isOutRef(ref, id, tok string) bool {
	run, ok := strings.CutPrefix(ref, "refs/airlock/out/"+id+"/")
	run, ok2 := strings.CutSuffix(run, "-"+tok+"/snap")
	return ok && ok2 && run != "" && strings.Trim(run, "0123456789") == ""
}

// restoreStream runs script in the sandbox and hands its output to fn as a
// buffered reader. When fn returns, the command is stopped if it is still
// writing. When fn fails because the stream ended early and the command
// could not be followed to its end (a lost connection, a Runner that never
// returned, the context), the error is the transport failure (wrapping
// sandbox.ErrTransport, never ErrHostile), with fn's observation as context;
// a stream that ended early from a command that exited non-zero, from a
// Runner that broke the protocol or failed on the host (runGuest) is that
// failure. When fn refused the stream (ErrHostile) before it ended, the
// command is left to end by itself for a moment (shell.Settle), and a run
// that then failed on the transport is that failure, ErrTransport only: its
// output is not judged (shell.Unjudged: an exec engine that failed prints
// its own error where the stream should be). Only output of a command that
// ran normally is judged by fn alone (ErrHostile). When fn stopped reading
// at the host's limit (ErrTooLarge) or on a host-side failure (a full
// disk), that is the error, whatever the command's end.
func (r *Round) restoreStream(ctx context.Context, op, script string, env map[string]string, fn func(*bufio.Reader) error) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	ran := make(chan struct{})
	var rerr error // set before ran is closed
	go func() {
		rerr = prepareLocked(runGuest(rctx, r.spec.Runner, op, sandbox.Command{Script: script, Env: env, Stdout: pw}, func(err error) { pw.CloseWithError(err) }))
		pw.CloseWithError(rerr)
		close(ran)
	}()
	sr := &shell.EndReader{R: pr}
	ferr := fn(bufio.NewReaderSize(sr, 256<<10))
	ended := sr.Ended() // the stream ended (the command's run did) before fn gave up
	settled := ferr != nil && !ended && errors.Is(ferr, sandbox.ErrProtocol) && shell.Settle(ran, pr)
	if ferr != nil {
		cancel()
	}
	pr.CloseWithError(errStop)
	<-ran
	if errors.Is(ferr, ErrTooLarge) || hostFailure(ferr) {
		// The host stopped reading on purpose, at its limit or because it
		// could not write what it read: that is the reason, not what the
		// command then died of (SIGPIPE).
		return ferr
	}
	if settled && ctx.Err() == nil && shell.Unjudged(rerr) {
		return rerr // the run failed on the transport by itself
	}
	if ferr != nil {
		if ended && rerr != nil && !errors.Is(rerr, errStop) {
			return cutErr(rerr, ferr)
		}
		return ferr
	}
	if rerr != nil && !errors.Is(rerr, errStop) {
		return rerr
	}
	return nil
}

// cutErr is the error of a restore stream that ended before fn gave up
// (ferr) because the command's run failed with rerr (see restoreStream).
func cutErr(rerr, ferr error) error {
	var ee *sandbox.ExitError
	// What fn saw, without the run's failure it quotes (the pipe passes
	// that on to the reader).
	seen := strings.ReplaceAll(ferr.Error(), ": "+rerr.Error(), "")
	switch {
	case errors.Is(rerr, sandbox.ErrTransport):
		return fmt.Errorf("%w (the stream was cut: %s)", rerr, seen)
	case errors.As(rerr, &ee), errors.Is(rerr, sandbox.ErrProtocol),
		!errors.Is(rerr, context.Canceled) && !errors.Is(rerr, context.DeadlineExceeded):
		// The command's failure, a broken protocol or the host's own
		// failure (runGuest) is why the stream ended.
		return rerr
	default: // the context ended
		return fmt.Errorf("%w: %w (the stream was cut: %s)", sandbox.ErrTransport, rerr, seen)
	}
}

// refHEAD is the Refused entry of a sandbox HEAD that names no commit
// (whyNoHead).
const refHEAD = "ref HEAD"

const whyNoHead = "the sandbox's HEAD names no commit (a ref the agent broke or removed, or an orphan branch): its commits, if any, did not come back; its work tree did, as edits on the local HEAD"

func (r *Round) hashKind(ctx context.Context) (hashKind, error) {
	f, err := r.git.Line(ctx, "rev-parse", "--show-object-format")
	if err != nil {
		return 0, fmt.Errorf("workspace: reading the object format of %s: %w", r.spec.Local, err)
	}
	if f == "sha256" {
		return hashGitSHA256, nil
	}
	return hashGitSHA1, nil
}

func (r *Round) restoreGit(ctx context.Context) (*Result, error) {
	g, id := r.git, r.rec.ID
	res := &Result{GitBacked: true}
	if err := os.MkdirAll(r.state, 0o700); err != nil {
		return nil, &fs.PathError{Op: "workspace.Restore", Path: r.state, Err: err}
	}
	if err := r.checkInProgress(ctx); err != nil {
		return nil, err
	}
	r.sweepLeftovers(ctx, true) // Restore holds the restore lock
	tok := strings.ToLower(rand.Text()[:12])
	bundle := filepath.Join(r.state, "restore-"+owner.Tag()+"-"+id+"-"+tok+".bundle")
	defer os.Remove(bundle)
	var h header
	err := r.restoreStream(ctx, "reading the sandbox work tree "+r.spec.Remote, r.restoreScript(tok, r.haveCommits(ctx)), r.guestEnv(), func(br *bufio.Reader) error {
		var err error
		if h, err = readHeader(br, true); err != nil {
			return err
		}
		if h.Tail == shell.TailNoChange {
			if n, _ := io.CopyN(io.Discard, br, 1); n > 0 {
				return fmt.Errorf("%w: data after the nochange line", ErrHostile)
			}
			return nil
		}
		f, err := os.OpenFile(bundle, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		lw := &limitWriter{w: f, n: r.o.maxBytes}
		_, err = io.Copy(lw, br)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if lw.over {
			return fmt.Errorf("%w: the bundle of %s's commits and work tree is larger than %d bytes; nothing was integrated: raise WithMaxBytes", ErrTooLarge, r.spec.Remote, r.o.maxBytes)
		}
		if err != nil {
			if hostFailure(err) {
				return fmt.Errorf("workspace: receiving the sandbox's bundle into %s failed on the host: %w; nothing was integrated and the sandbox still holds everything: free space on its file system (or fix what the error names) and run Restore again", bundle, err)
			}
			return fmt.Errorf("workspace: receiving the sandbox's bundle: %w", err)
		}
		r.o.report(sandbox.Progress{Asset: "restore", Bytes: r.o.maxBytes - lw.n, TotalBytes: r.o.maxBytes - lw.n})
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.refuseReported(h.Special, res)
	if h.Tail == shell.TailNoChange {
		cur, err := g.Line(ctx, "rev-parse", "-q", "--verify", "HEAD^{commit}")
		if err != nil && gitexec.Status(err) != 1 {
			return nil, err
		}
		res.Head = cur
		return res, nil
	}
	hk, err := r.hashKind(ctx)
	if err != nil {
		return nil, err
	}
	snap, err := r.fetchBundle(ctx, bundle, func(ref string) bool { return isOutRef(ref, id, tok) }, h, hk, res)
	if err != nil {
		return nil, err
	}
	defer snap.cleanup()
	if h.Head == "" && r.rec.Head != "" {
		// The round began on a commit and the sandbox's HEAD now names
		// none (a ref the agent broke, an orphan branch): its work tree
		// arrives, as edits on the local HEAD; no commit of it can.
		r.refuse(res, refHEAD, whyNoHead)
	}
	if err := r.install(ctx, snap, h, hk, res); err != nil {
		return nil, err
	}
	// The files written carry new stat data the index does not have yet:
	// refresh it, as git status would, so that git reset --keep (the
	// ConflictError's advice) and git merge do not find the entries "not
	// uptodate". Best effort: it changes no entry's content.
	_ = r.git.Run(ctx, gitexec.Cmd{Args: []string{"update-index", "-q", "--refresh"}})
	return res, nil
}

// install brings the received snapshot in: the work tree, the staged
// entries, then the sandbox's HEAD (snap.head, "" when refused: the
// local HEAD stays). The staged entries are judged, and a merge that
// would conflict fails, before any file is written; a failure after
// leaves the refs alone.
func (r *Round) install(ctx context.Context, snap *fetched, h header, hk hashKind, res *Result) error {
	moved, err := r.movedIndex(ctx)
	if err != nil {
		return err
	}
	staged, err := r.checkStaged(ctx, snap.git, withReverts(h.Staged, moved), res)
	if err != nil {
		return err
	}
	plan, err := r.planMerge(ctx, snap.head)
	if err != nil {
		return err
	}
	var fm *mergeFollow
	if snap.head != "" && plan.cur != "" {
		switch plan.how {
		case diverged:
			fm = &mergeFollow{cur: plan.cur, remote: snap.head, merged: plan.tree}
		case fastForward:
			fm = &mergeFollow{cur: plan.cur, remote: snap.head, merged: snap.head}
		}
	}
	files, err := r.applyGitFiles(ctx, snap.git, hk, snap.tree, h.Special, fm, res)
	if err == nil {
		err = r.finishIndex(ctx)
	}
	if err == nil {
		err = r.applyStaged(ctx, snap.git, hk, staged, moved, fm, res)
	}
	if err == nil {
		err = r.integrate(ctx, snap.head, plan, res)
	}
	// What was written is the sandbox's now, whether or not the Restore
	// got to its end: the baseline follows it (rebase.go).
	dctx := context.WithoutCancel(ctx)
	index, serr := r.stagedHeld(dctx, staged, moved)
	if serr == nil && fm != nil {
		index = fm.heldStaged(r, index)
	}
	if serr == nil {
		serr = r.rebaseGit(dctx, files, index)
	}
	if serr != nil {
		if err == nil {
			return serr
		}
		r.o.log.Warn("workspace: the round's baseline did not move after a failed restore", "round", r.rec.ID, "error", serr)
	}
	return err
}

// fetched is the sandbox's snapshot, received.
type fetched struct {
	git     *gitexec.Git // reads the snapshot's objects (a quarantine's, unless its pack moved into the repository)
	tree    string       // the snapshot's tree
	head    string       // the sandbox's HEAD as it is in the repository (rewritten; "" when unborn or refused)
	history bool         // the sandbox's commits are in the repository (false: refused)
	cleanup func()       // drops what receiving it left (a private ref, a quarantine)
}

// fetchBundle verifies the sandbox's bundle (of the ref want), indexes its pack into a
// quarantine, checks the snapshot is what the header said, and lets into
// the repository what receiveHistory accepts. A ref the bundle lists
// besides the snapshot's is listed in res.Refused and otherwise ignored
// (refs are never taken from a bundle). A bundle git cannot read, or a
// snapshot that is missing or not the commit the header names, fails with
// ErrHostile, and nothing of it enters the repository.
func (r *Round) fetchBundle(ctx context.Context, bundle string, want func(ref string) bool, h header, hk hashKind, res *Result) (_ *fetched, err error) {
	g := r.git
	if err := g.Run(ctx, gitexec.Cmd{Args: []string{"bundle", "verify", bundle}}); err != nil {
		return nil, refused(ctx, err, "verifying the sandbox's bundle", "the sandbox's bundle does not verify")
	}
	heads, err := g.Output(ctx, "bundle", "list-heads", bundle)
	if err != nil {
		return nil, refused(ctx, err, "listing the sandbox's bundle", "listing the sandbox's bundle")
	}
	lines := strings.Split(strings.TrimSuffix(string(heads), "\n"), "\n")
	if len(lines) > maxRefused {
		return nil, fmt.Errorf("%w: the sandbox's bundle lists %d refs, more than %d", ErrHostile, len(lines), maxRefused)
	}
	for _, l := range lines {
		if obj, name, _ := strings.Cut(l, " "); obj != h.Snap || !want(name) {
			r.refuse(res, name, "a ref the restore did not ask for, in the sandbox's bundle")
		}
	}
	objects, err := g.Line(ctx, "rev-parse", "--path-format=absolute", "--git-path", "objects")
	if err != nil {
		return nil, err
	}
	q, err := r.newQuarantine(objects)
	if err != nil {
		return nil, err
	}
	f := &fetched{git: q.git, cleanup: q.remove}
	defer func() {
		if err != nil {
			f.cleanup()
		}
	}()
	// A failing index-pack is the sandbox's pack or the host's disk: a
	// failure to write (git says so: a full disk, a quota, a read-only or
	// failing file system) or to read the bundle is the host's and never
	// ErrHostile; only what git refused in the pack is the sandbox's.
	hostErr := func(err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("workspace: receiving the sandbox's bundle: %w", cerr)
		}
		var pe *fs.PathError
		if hostFailure(err) || errors.As(err, &pe) {
			return r.storeFailed(q.dir, err)
		}
		return nil
	}
	strict := true
	if serr := indexPack(ctx, q.git, bundle, "--strict"); serr != nil {
		if errors.Is(serr, ErrHostile) {
			return nil, serr
		}
		if herr := hostErr(serr); herr != nil {
			return nil, herr
		}
		r.o.log.Warn("the sandbox's bundle fails the strict fsck; reading it through a quarantine", "round", r.rec.ID, "error", serr)
		strict = false
		if err := q.reset(); err != nil {
			return nil, r.storeFailed(q.dir, fmt.Errorf("emptying the quarantine: %w", err))
		}
		if err := indexPack(ctx, q.git, bundle); err != nil {
			if herr := hostErr(err); herr != nil {
				return nil, herr
			}
			return nil, fmt.Errorf("%w: the sandbox's bundle holds no valid pack: %w", ErrHostile, err)
		}
	}
	if err := q.git.Run(ctx, gitexec.Cmd{Args: []string{"rev-list", "--objects", "--quiet", h.Snap, "--not", "--all"}}); err != nil {
		return nil, refused(ctx, err, "checking the sandbox's bundle", "the sandbox's bundle is incomplete")
	}
	got, err := q.git.Line(ctx, "rev-list", "--parents", "-n", "1", h.Snap)
	if err != nil {
		return nil, refused(ctx, err, "reading the sandbox's snapshot", "the sandbox's snapshot "+h.Snap+" did not arrive")
	}
	wantParents := []string{h.Snap}
	if h.Head != "" {
		wantParents = append(wantParents, h.Head)
	}
	if h.Index != "" {
		wantParents = append(wantParents, h.Index)
	}
	if !slices.Equal(strings.Fields(got), wantParents) {
		return nil, fmt.Errorf("%w: the sandbox's snapshot is %q, want commit %s with parents %q", ErrHostile, got, h.Snap, wantParents[1:])
	}
	if f.tree, err = q.git.Line(ctx, "rev-parse", h.Snap+"^{tree}"); err != nil {
		return nil, err
	}
	if err := r.receiveHistory(ctx, q, objects, f, h, hk, strict, res); err != nil {
		return nil, err
	}
	return f, nil
}

// change is one line of git diff-tree -r -z (or diff-index).
type change struct {
	oldMode, newMode, oldID, newID, path string
	status                               string // A, D, M, T; U for an unmerged path (diff-index)
}

// parseDiffTree reads `git diff-tree -r -z --no-renames` output.
func parseDiffTree(out []byte) ([]change, error) {
	var cs []change
	f := bytes.Split(out, []byte{0})
	for i := 0; i+1 < len(f); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(string(f[i]), ":"))
		if len(meta) != 5 {
			return nil, fmt.Errorf("workspace: unexpected diff-tree record %q", f[i])
		}
		cs = append(cs, change{meta[0], meta[1], meta[2], meta[3], string(f[i+1]), meta[4]})
	}
	return cs, nil
}

// applyGitFiles merges the sandbox's work tree newTree (read through g)
// into the local work tree, against the baseline. Everything is decided
// before anything is written: which entries arrive, which local edits are
// kept, which entries are refused (and why), whether each change of type
// (file, link, directory) applies completely. Then deletions, replaced
// directories, files and links are written in that order; any write that
// fails stops the restore with an error naming the path, before the refs
// move, and a later Restore finishes the work. It returns the paths where
// the local work tree holds the sandbox's entry (rebase.go), as far as it
// got when it fails.
func (r *Round) applyGitFiles(ctx context.Context, g *gitexec.Git, hk hashKind, newTree string, special map[string]byte, fm *mergeFollow, res *Result) (moved []baseEntry, err error) {
	out, err := g.Output(ctx, "diff-tree", "-r", "-z", "--no-renames", r.baseTree(), newTree)
	if err != nil {
		return moved, fmt.Errorf("workspace: comparing the sandbox's work tree with the round's baseline %s failed (%w); if the baseline's objects were pruned (git gc --prune=now, git repack -a -d), this round cannot be restored: the agent's work is still in the sandbox at %s, and a new Prepare clears it, so copy what you need from there first", r.baseTree(), err, r.spec.Remote)
	}
	changes, err := parseDiffTree(out)
	if err != nil {
		return moved, err
	}
	l, err := openLocal(r.spec.Local, hk, r.journalDir())
	if err != nil {
		return moved, err
	}
	l.beforePlace = r.o.beforePlace
	defer l.close()
	defer func() {
		if err != nil {
			l.unmake() // the directories made for what did not arrive
		}
	}()
	refuse := func(p, why string) { r.refuse(res, p, why) }
	type plan struct {
		base, rem state
		id, mode  string     // the sandbox's blob and git mode
		blocker   string     // a local non-directory above the path, which must go first
		typeDir   bool       // replaces a local directory
		held      *baseEntry // the sandbox's entry, where the merge's is written (followMerge)
	}
	plans := map[string]*plan{}
	var order []string
	baseDirs := map[string]bool{} // directories of the baseline with a change below
	remDirs := map[string]bool{}  // directories of the sandbox's tree with a change below
	for _, c := range changes {
		p := c.path
		switch {
		case !tree.ValidPath(p):
			refuse(p, "not a clean relative path")
			continue
		case reserved(p):
			refuse(p, whyReserved(p))
			continue
		case hasTmpName(p):
			refuse(p, whyTmpName)
			continue
		case excluded(r.rec.Exclude, p):
			continue
		case special[p] != 0 && !writtenStripped(special[p]):
			continue // already refused
		}
		bk, bperm, _ := gitMode(c.oldMode)
		rk, rperm, ok := gitMode(c.newMode)
		if !ok {
			refuse(p, "a submodule or unknown git mode "+c.newMode)
			continue
		}
		pl := &plan{base: state{kind: bk, perm: bperm}, rem: state{kind: rk, perm: rperm}, id: c.newID, mode: c.newMode}
		if bk != 0 {
			pl.base.id = c.oldID
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				baseDirs[d] = true
			}
		}
		if rk != 0 {
			pl.rem.id = c.newID
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				remDirs[d] = true
			}
		}
		plans[p] = pl
		order = append(order, p)
	}
	holds := func(p string) {
		e := baseEntry{path: p}
		if pl := plans[p]; pl.held != nil {
			e = *pl.held
		} else if pl.rem.kind != 0 {
			e.mode, e.id = pl.mode, pl.id
		}
		moved = append(moved, e)
	}
	deleted := map[string]bool{}
	arrive := map[string]*plan{} // files and links to write
	kept := map[string]bool{}
	locs, blockers, err := r.localStates(ctx, l, order, func(p string) (state, state) { return plans[p].base, plans[p].rem })
	if err != nil {
		return moved, err
	}
	sparse, err := r.skipWorktree(ctx, order, func(p string) bool {
		return locs[p].kind == 0 && plans[p].base.kind != 0 && !locs[p].eq(plans[p].rem)
	})
	if err != nil {
		return moved, err
	}
	// Regular files the sandbox changed that the work tree holds otherwise
	// than both the sandbox and the baseline (a local change, which would
	// be Kept): the merge's file where both sides only committed
	// (followMerge). Elsewhere the sandbox's change of its own work tree
	// stands, as before.
	var both []string
	for _, p := range order {
		if pl, loc := plans[p], locs[p]; loc.kind == 'f' && pl.rem.kind == 'f' && !loc.eq(pl.rem) && !loc.eq(pl.base) && !sparse[p] {
			both = append(both, p)
		}
	}
	follow, err := r.followMerge(ctx, fm, both, func(p string) baseEntry { return baseEntry{path: p, mode: plans[p].mode, id: plans[p].id} },
		func(p string) state { return locs[p] })
	if err != nil {
		return moved, err
	}
	for _, p := range order {
		pl, loc, blocker := plans[p], locs[p], blockers[p]
		switch {
		case loc.eq(pl.rem), loc.kind == 'd' && pl.rem.kind == 0 && remDirs[p]:
			// Already as the sandbox has it (a directory there, too).
			holds(p)
		case sparse[p]:
			// Not in the user's sparse checkout: missing by the user's
			// choice, not the user's deletion.
			refuse(p, whySparse)
		case loc.kind == 'd' && pl.rem.kind != 0 && pl.base.kind == 0 && baseDirs[p]:
			pl.typeDir = true
			arrive[p] = pl
		case loc.kind == 'd' && pl.rem.kind != 0 && pl.base.kind == 0:
			// A local directory where the baseline has nothing: one that
			// holds no file (a Restore that failed may have made it for
			// what it did not get to write) gives way like the baseline's.
			empty, err := l.holds(p, func(string) bool { return false })
			if err != nil {
				return moved, err
			}
			if empty == "" {
				pl.typeDir = true
				arrive[p] = pl
			} else {
				kept[p] = true
			}
		case follow[p].id != "":
			// Both sides only committed: the merge's file (followMerge),
			// with the sandbox's as the baseline.
			m := follow[p]
			pl.held = &baseEntry{path: p, mode: pl.mode, id: pl.id}
			k, perm, _ := gitMode(m.mode)
			pl.rem, pl.id, pl.mode = state{kind: k, perm: perm, id: m.id}, m.id, m.mode
			pl.blocker = blocker
			arrive[p] = pl
		case !loc.eq(pl.base):
			kept[p] = true
		case pl.rem.kind == 0:
			deleted[p] = true
		default:
			pl.blocker = blocker
			arrive[p] = pl
		}
	}
	// withdraw refuses p and keeps what its change of type would delete.
	withdraw := func(p, why string) {
		refuse(p, why)
		delete(arrive, p)
		if !plans[p].typeDir {
			return
		}
		for d := range deleted {
			if below(d, p) {
				delete(deleted, d)
				refuse(d, fmt.Sprintf(whyBelowRefused, p))
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(arrive)) {
		pl := arrive[p]
		switch {
		case pl.blocker != "" && !deleted[pl.blocker]:
			// A local file or link stands where the sandbox has a
			// directory: a local edit, which wins.
			kept[pl.blocker] = true
			withdraw(p, fmt.Sprintf(whyBelowKept, pl.blocker))
		case pl.typeDir:
			hold, err := l.holds(p, func(e string) bool { return deleted[e] })
			if err != nil {
				return moved, err
			}
			if hold != "" {
				withdraw(p, fmt.Sprintf(whyDirHolds, hold))
			}
		}
	}
	// Sizes and the byte limit, in the order of the sandbox's tree.
	paths := slices.Sorted(maps.Keys(arrive))
	sizes, err := blobSizes(ctx, g, paths, func(p string) string { return arrive[p].id })
	if err != nil {
		return moved, err
	}
	budget := r.o.maxBytes
	for _, p := range paths {
		switch {
		case sizes[p] > budget:
			withdraw(p, "over the byte limit")
		case arrive[p].rem.kind == 'l' && sizes[p] > 4096:
			withdraw(p, whyLinkOutside)
		case arrive[p].rem.kind == 'f':
			budget -= sizes[p]
		}
	}
	// Links, against the tree as it will be.
	links := map[string]string{}
	files := map[string]bool{}
	var linkPaths []string
	for p, pl := range arrive {
		if pl.rem.kind == 'l' {
			linkPaths = append(linkPaths, p)
		} else {
			files[p] = true
		}
	}
	slices.Sort(linkPaths)
	err = readBlobs(ctx, g, linkPaths, func(p string) string { return arrive[p].id }, func(p string, size int64, body io.Reader) error {
		t, err := io.ReadAll(body)
		links[p] = string(t)
		return err
	})
	if err != nil {
		return moved, err
	}
	bad, err := newLinkCheck(l, links, files).decide()
	if err != nil {
		return moved, err
	}
	for _, p := range slices.Sorted(maps.Keys(bad)) {
		withdraw(p, bad[p])
	}
	for p := range kept {
		res.Kept = append(res.Kept, p)
	}

	// Writes: deletions, the directories a file or link replaces, files,
	// links.
	dirs := map[string]bool{}
	for _, p := range slices.Sorted(maps.Keys(deleted)) {
		if err := l.remove(p); err != nil {
			return moved, l.writeError(p, err)
		}
		res.Deleted = append(res.Deleted, p)
		holds(p)
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(arrive)) {
		if arrive[p].typeDir {
			if err := l.removeDir(p); err != nil {
				return moved, err
			}
			delete(dirs, p)
		}
	}
	if len(dirs) > 0 {
		remoteDirs, err := g.Output(ctx, "ls-tree", "-r", "-d", "-z", "--name-only", newTree)
		if err != nil {
			return moved, err
		}
		keep := map[string]bool{}
		for _, d := range bytes.Split(remoteDirs, []byte{0}) {
			keep[string(d)] = true
		}
		ds := make([]string, 0, len(dirs))
		for d := range dirs {
			if !keep[d] {
				ds = append(ds, d)
			}
		}
		slices.SortFunc(ds, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		for _, d := range ds {
			l.root.Remove(d) // only when empty: a non-empty directory stays
		}
	}
	var filePaths []string
	for _, p := range paths {
		if pl, ok := arrive[p]; ok && pl.rem.kind == 'f' {
			filePaths = append(filePaths, p)
		}
	}
	write := func(p string, body io.Reader) error {
		err := l.writeFile(p, body, arrive[p].rem.perm)
		if why := nameRefused(err); why != "" {
			refuse(p, why)
			return nil
		}
		var ce *convertError
		switch {
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("workspace: Restore stopped while writing %s: %w; nothing was lost (the sandbox still holds what did not arrive): run Restore again", p, err)
		case errors.As(err, &ce):
			return err
		case err != nil:
			return l.writeError(p, err)
		}
		res.Updated = append(res.Updated, p)
		holds(p)
		return nil
	}
	// The attribute files first: the others are written in the form the
	// attributes give once they are in place, as git checkout does.
	var attrs, rest []string
	for _, p := range filePaths {
		if path.Base(p) == ".gitattributes" {
			attrs = append(attrs, p)
		} else {
			rest = append(rest, p)
		}
	}
	for _, set := range [][]string{attrs, rest} {
		if err := writeBlobs(ctx, g, set, func(p string) string { return arrive[p].id }, write); err != nil {
			return moved, err
		}
	}
	for _, p := range linkPaths {
		if _, ok := arrive[p]; !ok {
			continue
		}
		err := l.writeLink(p, links[p])
		if why := nameRefused(err); why != "" {
			refuse(p, why)
			continue
		}
		if err != nil {
			return moved, l.writeError(p, err)
		}
		res.Updated = append(res.Updated, p)
		holds(p)
	}
	return moved, nil
}

// localStates reads the local state of each path and the local
// non-directory above it, if any (statAt). A local file whose bytes are
// neither the baseline's blob nor the sandbox's (sides) is hashed again
// in its clean form, as git stores it (convert.go): when that is one of
// them, the file differs by a checkout conversion only, and that is its
// state. A file whose clean form cannot be read (a filter driver that
// fails) keeps its bytes' id: a local edit.
//
// Bytes equal to a blob's decide without a clean form: a file sent as a
// dirty edit is the baseline as the sandbox's git stored it, which may
// not be what the host's configuration makes of it (core.autocrlf in the
// user's global file). So a local edit whose bytes are exactly a blob's
// stored form counts as that blob, which only a driver whose clean
// changes content (rot13, encryption) lets a user write.
func (r *Round) localStates(ctx context.Context, l *local, paths []string, sides func(string) (base, rem state)) (map[string]state, map[string]string, error) {
	locs := make(map[string]state, len(paths))
	blockers := map[string]string{}
	var unsure []string
	for _, p := range paths {
		loc, blocker, err := l.statAt(p)
		if err != nil {
			return nil, nil, err
		}
		locs[p], blockers[p] = loc, blocker
		if base, rem := sides(p); loc.kind == 'f' && (base.kind == 'f' || rem.kind == 'f') && !loc.eq(base) && !loc.eq(rem) {
			unsure = append(unsure, p)
		}
	}
	for p, id := range cleanIDs(ctx, r.git, unsure, r.o.log) {
		c := locs[p]
		c.id = id
		if base, rem := sides(p); c.eq(base) || c.eq(rem) {
			locs[p] = c
		}
	}
	return locs, blockers, nil
}

// whySparse is the reason a sandbox change of a path outside the local
// sparse checkout is refused.
const whySparse = "outside the local sparse checkout (skip-worktree): not written; the sandbox holds the agent's version (widen the sparse checkout and restore again, or take it from the sandbox)"

// skipWorktree returns which of the paths that want(p) are in the local
// index with the skip-worktree bit (a sparse checkout leaves them out of
// the work tree); git is asked only when there is such a path.
func (r *Round) skipWorktree(ctx context.Context, paths []string, want func(string) bool) (map[string]bool, error) {
	skip := map[string]bool{}
	var ask []string
	for _, p := range paths {
		if want(p) {
			ask = append(ask, p)
		}
	}
	err := inChunks(ask, func(paths []string) error {
		var out bytes.Buffer
		args := append([]string{"ls-files", "-z", "-t", "--"}, paths...)
		if err := r.git.Run(ctx, gitexec.Cmd{Args: args, Env: []string{"GIT_LITERAL_PATHSPECS=1"}, Stdout: &out}); err != nil {
			return fmt.Errorf("workspace: reading the skip-worktree bits of %s's index: %w", r.spec.Local, err)
		}
		for _, rec := range strings.Split(out.String(), "\x00") {
			if p, ok := strings.CutPrefix(rec, "S "); ok {
				skip[p] = true
			}
		}
		return nil
	})
	return skip, err
}

// inChunks calls fn with the paths, at most 512 a call (a command line's
// room).
func inChunks(paths []string, fn func([]string) error) error {
	for len(paths) > 0 {
		n := min(len(paths), 512)
		if err := fn(paths[:n]); err != nil {
			return err
		}
		paths = paths[n:]
	}
	return nil
}

// blobSizes returns the size of each path's blob (id(p)), read through
// g; an object that is not a blob is ErrHostile.
func blobSizes(ctx context.Context, g *gitexec.Git, paths []string, id func(string) string) (map[string]int64, error) {
	sizes := map[string]int64{}
	if len(paths) == 0 {
		return sizes, nil
	}
	var in strings.Builder
	for _, p := range paths {
		in.WriteString(id(p) + "\n")
	}
	var out bytes.Buffer
	if err := g.Run(ctx, gitexec.Cmd{Args: []string{"cat-file", "--batch-check"}, Stdin: strings.NewReader(in.String()), Stdout: &out}); err != nil {
		return nil, fmt.Errorf("workspace: reading the sandbox's objects: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(paths) {
		return nil, fmt.Errorf("%w: git cat-file listed %d objects for %d", ErrHostile, len(lines), len(paths))
	}
	for i, p := range paths {
		f := strings.Fields(lines[i])
		if len(f) != 3 || f[0] != id(p) || f[1] != "blob" {
			return nil, fmt.Errorf("%w: object %s is %q, not a blob", ErrHostile, id(p), lines[i])
		}
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("workspace: bad object size in %q", lines[i])
		}
		sizes[p] = n
	}
	return sizes, nil
}

// readBlobs streams each path's blob (id(p)), read through g, to fn.
func readBlobs(ctx context.Context, g *gitexec.Git, paths []string, id func(string) string, fn func(p string, size int64, body io.Reader) error) error {
	if len(paths) == 0 {
		return nil
	}
	var in strings.Builder
	for _, p := range paths {
		in.WriteString(id(p) + "\n")
	}
	return readGit(ctx, g, gitexec.Cmd{Args: []string{"cat-file", "--batch"}, Stdin: strings.NewReader(in.String())}, nil, func(r io.Reader) error {
		br := bufio.NewReaderSize(r, 256<<10)
		for _, p := range paths {
			hl, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("workspace: reading objects: %w", err)
			}
			f := strings.Fields(hl)
			if len(f) != 3 || f[0] != id(p) || f[1] != "blob" {
				return fmt.Errorf("%w: object %s is %q, not a blob", ErrHostile, id(p), strings.TrimSpace(hl))
			}
			size, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil || size < 0 {
				return fmt.Errorf("workspace: bad object size in %q", hl)
			}
			cr := &countReader{r: io.LimitReader(br, size)}
			if err := fn(p, size, cr); err != nil {
				return err
			}
			if cr.n < size {
				if _, err := io.Copy(io.Discard, cr); err != nil {
					return fmt.Errorf("workspace: reading objects: %w", err)
				}
			}
			if cr.n != size {
				return fmt.Errorf("workspace: reading objects: object %s ended after %d of %d bytes", id(p), cr.n, size)
			}
			if _, err := br.Discard(1); err != nil { // the newline after the content
				return fmt.Errorf("workspace: reading objects: %w", err)
			}
		}
		return nil
	})
}

// readGit runs c through g with its standard output piped to read; when
// read fails, git is stopped. It returns read's error, else git's (wrap,
// if not nil, dresses a failure of git's own, not a stop). A git that
// fails makes the pipe fail rather than end, so read never takes a cut
// output for a whole one.
func readGit(ctx context.Context, g *gitexec.Git, c gitexec.Cmd, wrap func(error) error, read func(io.Reader) error) error {
	pr, pw := io.Pipe()
	c.Stdout = pw
	done := make(chan error, 1)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		err := g.Run(cctx, c)
		if err != nil && wrap != nil && cctx.Err() == nil {
			err = wrap(err)
		}
		pw.CloseWithError(err)
		done <- err
	}()
	rerr := read(pr)
	if rerr != nil {
		cancel()
	}
	pr.CloseWithError(errStop)
	gerr := <-done
	if rerr != nil {
		return rerr
	}
	if gerr != nil && !errors.Is(gerr, errStop) {
		return gerr
	}
	return nil
}

// refused is the error of a host-side git command that checks what the
// sandbox sent (its bundle, its snapshot) and failed while doing (what it
// was doing): ErrHostile, with refusal, only when git ran and refused the
// data. A Restore whose context ended meanwhile (git was killed, not
// refused), a git that could not be run, or one that could not read or
// write on the host is not the sandbox's doing and is never ErrHostile:
// nothing was integrated and the sandbox still holds everything.
func refused(ctx context.Context, err error, doing, refusal string) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("workspace: %s: %w", doing, cerr)
	}
	var ge *gitexec.Error
	if !errors.As(err, &ge) || hostFailure(err) {
		return fmt.Errorf("workspace: %s failed on the host: %w; nothing was integrated and the sandbox still holds everything: fix what the error names and run Restore again", doing, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrHostile, refusal, err)
}

// hostFailure reports an error of the host itself (a full disk, an
// exceeded quota, a read-only file system, an I/O error, a file too large
// or not writable, a write git could not do), not of what the sandbox
// sent.
func hostFailure(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO, syscall.EFBIG, syscall.EACCES, syscall.EPERM, gitexec.ErrWrite} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// storeFailed is the error of a host-side failure to store the sandbox's
// objects in dir (a quarantine of the repository's object directory):
// it wraps err and says what to do; nothing was integrated, and the
// sandbox still holds everything, so the round stays restorable.
func (r *Round) storeFailed(dir string, err error) error {
	return fmt.Errorf("workspace: storing the sandbox's objects in %s failed on the host: %w; nothing was integrated and the sandbox still holds everything: free space on the file system of %s (or fix what the error names) and run Restore again", dir, err, r.gitDir)
}

type countReader struct {
	r io.Reader
	n int64
}

// Read reads from r and adds the bytes read to n.
func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// integrate installs the sandbox's HEAD commit into the local HEAD: a
// fast-forward when the local HEAD is its ancestor, else a merge commit;
// the ref moves by compare-and-swap, retried when it moved meanwhile. p,
// from planMerge, is used again while the local HEAD is still p.cur.
func (r *Round) integrate(ctx context.Context, remote string, p mergePlan, res *Result) error {
	g := r.git
	if err := r.finishIndex(ctx); err != nil {
		return err
	}
	lock, locked := "", 0 // a ref lock that each attempt found in place
	for attempt := range r.o.casRetries {
		cur, err := g.Line(ctx, "rev-parse", "-q", "--verify", "HEAD^{commit}")
		if err != nil && gitexec.Status(err) != 1 {
			return err
		}
		ref, err := g.Line(ctx, "symbolic-ref", "-q", "HEAD")
		if err != nil && gitexec.Status(err) != 1 {
			return err
		}
		res.Head = cur
		if cur != p.cur {
			if p, err = r.planMerge(ctx, remote); err != nil {
				return err
			}
			if p.cur != cur {
				continue // moved again: read it again
			}
		}
		if p.how == upToDate {
			return nil
		}
		newHead, merged := remote, p.how == diverged
		if merged {
			if newHead, err = r.mergeCommit(ctx, p.tree, cur, remote); err != nil {
				return err
			}
		}
		count := []string{"rev-list", "--count", remote}
		if cur != "" {
			count = append(count, "^"+cur)
		}
		n, err := g.Line(ctx, count...)
		if err != nil {
			return err
		}
		args := []string{"update-ref", "-m", "airlock: restore round " + r.rec.ID}
		if ref == "" {
			args = append(args, "--no-deref", "HEAD")
		} else {
			args = append(args, ref)
		}
		args = append(args, newHead, cur)
		// The marker (an empty file: no data to write) says the index
		// has yet to follow, until it has.
		marker := r.indexMarker(cur, newHead)
		if err := writeMarker(marker); err != nil {
			return fmt.Errorf("workspace: recording the move of HEAD of %s in %s (HEAD has not moved; fix the cause and run Restore again): %w", r.spec.Local, marker, err)
		}
		if r.o.beforeCAS != nil {
			r.o.beforeCAS(attempt)
		}
		if err := g.Run(ctx, gitexec.Cmd{Args: args}); err != nil {
			os.Remove(marker)
			if casLost(err) {
				if l := refLock(err); l != "" && (lock == "" || l == lock) {
					lock, locked = l, locked+1
				}
				continue // moved under us: try again
			}
			return fmt.Errorf("workspace: moving HEAD of %s to %s (it has not moved; the work tree already holds the sandbox's files: fix the cause and run Restore again): %w", r.spec.Local, newHead, err)
		}
		res.Commits, _ = strconv.Atoi(n)
		res.Merged = merged
		res.Head, res.Branch = newHead, ref
		if ref != r.rec.Branch {
			r.o.log.Warn("the sandbox's commits moved a ref other than the branch the round was prepared on (HEAD was switched during the round)", "round", r.rec.ID, "moved", cmp.Or(ref, "detached HEAD"), "prepared on", cmp.Or(r.rec.Branch, "detached HEAD"))
		}
		if err := r.updateIndex(ctx, cur, newHead); err != nil {
			return err
		}
		os.Remove(marker)
		return nil
	}
	if locked == r.o.casRetries {
		return fmt.Errorf("%w: the lock %s of the ref of HEAD of %s stayed through each of %d attempts (HEAD has not moved; the work tree already holds the sandbox's files): another git is updating the ref, or a git was killed while it did (a host killed mid-restore leaves one); when no git runs in %s, remove %s and run Restore again", ErrRace, lock, r.spec.Local, r.o.casRetries, r.spec.Local, lock)
	}
	return fmt.Errorf("%w: HEAD of %s moved during each of %d attempts; restore again when it is quiet", ErrRace, r.spec.Local, r.o.casRetries)
}

// refLock returns the lock file an update-ref failed to create because it
// exists ("Unable to create '<path>.lock': File exists"), "" otherwise.
func refLock(err error) string {
	msg := err.Error()
	_, rest, ok := strings.Cut(msg, "Unable to create '")
	if !ok {
		return ""
	}
	p, rest, ok := strings.Cut(rest, "'")
	if !ok || !strings.HasSuffix(p, ".lock") || !strings.HasPrefix(rest, ": File exists") {
		return ""
	}
	return p
}

// casLost reports an update-ref that failed because the ref was not at the
// expected old value (or was being updated by another process).
func casLost(err error) bool {
	if gitexec.Status(err) != 128 {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "but expected") || strings.Contains(msg, "already exists") || strings.Contains(msg, "cannot lock ref")
}

func (r *Round) isAncestor(ctx context.Context, a, b string) (bool, error) {
	err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"merge-base", "--is-ancestor", a, b}})
	if err == nil {
		return true, nil
	}
	if gitexec.Status(err) == 1 {
		return false, nil
	}
	return false, err
}

// mergePlan is how the sandbox's HEAD would be installed on the local
// HEAD cur: upToDate, fastForward, or diverged with the merged tree.
type mergePlan struct {
	cur  string
	how  int
	tree string
}

// planMerge reads the local HEAD and says how the sandbox's HEAD remote
// relates to it, merging the trees when they diverged; a merge that does
// not apply cleanly fails with a *ConflictError. It changes nothing.
func (r *Round) planMerge(ctx context.Context, remote string) (mergePlan, error) {
	cur, err := r.git.Line(ctx, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if err != nil && gitexec.Status(err) != 1 {
		return mergePlan{}, err
	}
	p := mergePlan{cur: cur}
	if p.how, err = r.relate(ctx, cur, remote); err != nil || p.how != diverged {
		return p, err
	}
	p.tree, err = r.mergeTree(ctx, cur, remote)
	return p, err
}

// How the sandbox's HEAD relates to the local one.
const (
	upToDate    = iota // nothing to install: no sandbox HEAD, or it is the local HEAD or its ancestor
	fastForward        // the local HEAD is unborn or an ancestor of the sandbox's
	diverged           // a merge commit is needed
)

// relate says how the sandbox's HEAD remote relates to the local HEAD cur
// ("" when unborn, as is remote).
func (r *Round) relate(ctx context.Context, cur, remote string) (int, error) {
	if remote == "" || remote == cur {
		return upToDate, nil
	}
	if cur == "" {
		return fastForward, nil
	}
	if ok, err := r.isAncestor(ctx, remote, cur); err != nil || ok {
		return upToDate, err
	}
	ff, err := r.isAncestor(ctx, cur, remote)
	if err != nil || ff {
		return fastForward, err
	}
	return diverged, nil
}

// mergeTree writes the tree of merging cur and remote, or fails with a
// *ConflictError naming the conflicting paths. A round prepared on an
// unborn HEAD has two root commits to merge when the user committed too:
// both histories began with nothing, so they merge over the empty tree
// (a file both added differently conflicts). Any other round whose
// sandbox's commits share no history with cur (the branch was replaced
// since Prepare) fails with ErrConflict and changes nothing.
func (r *Round) mergeTree(ctx context.Context, cur, remote string) (string, error) {
	var out bytes.Buffer
	args := []string{"merge-tree", "--write-tree", "-z", "--name-only", "--no-messages"}
	if r.rec.Head == "" {
		args = append(args, "--allow-unrelated-histories")
	}
	err := r.git.Run(ctx, gitexec.Cmd{Args: append(args, cur, remote), Stdout: &out})
	f := strings.Split(out.String(), "\x00")
	if gitexec.Status(err) == 1 {
		var paths []string
		for _, p := range f[1:] {
			if p == "" {
				break
			}
			paths = append(paths, p)
		}
		return "", &ConflictError{Paths: slices.Compact(paths), Base: r.rec.Head}
	}
	if err != nil && r.rec.Head != "" && ctx.Err() == nil {
		base, berr := r.git.Output(ctx, "merge-base", cur, remote)
		if gitexec.Status(berr) == 1 && len(base) == 0 {
			return "", fmt.Errorf("workspace: the sandbox's commits (%s) share no history with the local HEAD %s (%w): the round was prepared on %s, and HEAD's branch was replaced since (an orphan branch, a new history); nothing was changed locally: check out a branch that holds %[4]s and run Restore again (the sandbox still holds its commits)", remote, cur, ErrConflict, r.rec.Head)
		}
	}
	if err != nil {
		return "", fmt.Errorf("workspace: merging the sandbox's commits: %w", err)
	}
	return strings.TrimSpace(f[0]), nil
}

// mergeCommit writes the merge commit of cur and remote with tree t.
func (r *Round) mergeCommit(ctx context.Context, t, cur, remote string) (string, error) {
	var c bytes.Buffer
	err := r.git.Run(ctx, gitexec.Cmd{Args: []string{"commit-tree", t, "-p", cur, "-p", remote, "-m", "airlock: merge round " + r.rec.ID + " from the sandbox"}, Env: r.identEnv(), Stdout: &c})
	return strings.TrimSpace(c.String()), err
}

// updateIndex moves every index entry that still equals the old HEAD's to
// the new HEAD's; an entry the user staged differently is left alone.
func (r *Round) updateIndex(ctx context.Context, oldHead, newHead string) error {
	g := r.git
	from := oldHead
	if from == "" {
		var t bytes.Buffer
		if err := g.Run(ctx, gitexec.Cmd{Args: []string{"mktree"}, Stdin: strings.NewReader(""), Stdout: &t}); err != nil {
			return err
		}
		from = strings.TrimSpace(t.String())
	}
	out, err := g.Output(ctx, "diff-tree", "-r", "-z", "--no-renames", from, newHead)
	if err != nil {
		return err
	}
	changes, err := parseDiffTree(out)
	if err != nil || len(changes) == 0 {
		return err
	}
	ls, err := g.Output(ctx, "ls-files", "-s", "-z")
	if err != nil {
		return err
	}
	index := map[string]string{} // path -> "mode id", stage 0; "!" when unmerged
	for _, rec := range bytes.Split(ls, []byte{0}) {
		meta, p, ok := strings.Cut(string(rec), "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta)
		if len(f) != 3 {
			continue
		}
		if f[2] != "0" {
			index[p] = "!"
		} else {
			index[p] = f[0] + " " + f[1]
		}
	}
	zero := strings.Repeat("0", len(newHead))
	var in bytes.Buffer
	for _, c := range changes {
		old := ""
		if c.oldMode != "000000" {
			old = c.oldMode + " " + c.oldID
		}
		if index[c.path] != old {
			continue // staged differently by the user (or unmerged): keep
		}
		if c.newMode == "000000" {
			fmt.Fprintf(&in, "0 %s\t%s\x00", zero, c.path)
		} else {
			fmt.Fprintf(&in, "%s %s\t%s\x00", c.newMode, c.newID, c.path)
		}
	}
	if in.Len() == 0 {
		return nil
	}
	if err := g.Run(ctx, gitexec.Cmd{Args: []string{"update-index", "-z", "--index-info"}, Stdin: &in}); err != nil {
		return fmt.Errorf("workspace: HEAD of %s moved to %s and the work tree is complete, but the index could not follow: %w; fix the cause and run Restore again, which brings the index along", r.spec.Local, newHead, err)
	}
	return nil
}

// indexMarker is the state file that says the index has yet to follow
// HEAD from old ("" when it was unborn) to new.
func (r *Round) indexMarker(old, new string) string {
	if old == "" {
		old = "unborn"
	}
	return filepath.Join(r.state, r.rec.ID+".index-"+old+"-"+new)
}

func writeMarker(p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// finishIndex brings the index along after an earlier restore of the
// round moved HEAD but could not update the index (its marker is still
// there). When HEAD has moved on since, the marker is dropped: the index
// is then the user's.
func (r *Round) finishIndex(ctx context.Context) error {
	ms, err := filepath.Glob(filepath.Join(r.state, r.rec.ID+".index-*"))
	if err != nil || len(ms) == 0 {
		return err
	}
	cur, err := r.git.Line(ctx, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if err != nil && gitexec.Status(err) != 1 {
		return err
	}
	for _, m := range ms {
		old, new, ok := strings.Cut(strings.TrimPrefix(filepath.Base(m), r.rec.ID+".index-"), "-")
		if !ok || (!shell.IsObjectName(old) && old != "unborn") || !shell.IsObjectName(new) {
			continue
		}
		if old == "unborn" {
			old = ""
		}
		if cur == new {
			if err := r.updateIndex(ctx, old, new); err != nil {
				return err
			}
		} else {
			r.o.log.Warn("HEAD moved since an earlier restore could not update the index; leaving the index alone", "round", r.rec.ID, "head", cur, "restored", new)
		}
		if err := os.Remove(m); err != nil {
			return fmt.Errorf("workspace: removing %s: %w", m, err)
		}
	}
	return nil
}
