package attack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/internal/hostiletree"
	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
	"github.com/airlockdev/airlock/workspace"
)

// Hostile sandboxes: the one table of internal/hostiletree, staged from
// (every Target), left by the agent in the sandbox's work tree for a
// Restore (both kinds, every runner), and registered as deliverables
// (every runner). For each case: nothing is written outside the
// destination, no link on the host resolves outside the work tree, Refused
// lists what did not arrive, and stage never follows a link.
// AIRLOCK_HOSTILE=full makes the many-files case 100,000 files (2,000 by
// default).

// hostileCases is the table as the suite runs it: the small cases and the
// many-files case (the sparse file has tests of its own).
func hostileCases() []hostiletree.Case {
	n := 2_000
	if os.Getenv("AIRLOCK_HOSTILE") == "full" {
		n = 100_000
	}
	return append(hostiletree.Cases(), hostiletree.Many(n))
}

// overSSHD returns the cases named, to run over a real sshd, whose every
// command costs a login (0.2-0.5 s on a loaded 2-core machine); with
// AIRLOCK_HOSTILE=full, every case. The host's logic is the same over
// every runner; sshd proves the real server's shell and SFTP.
func overSSHD(cases []hostiletree.Case, names ...string) []hostiletree.Case {
	if os.Getenv("AIRLOCK_HOSTILE") == "full" {
		return cases
	}
	return slices.DeleteFunc(slices.Clone(cases), func(c hostiletree.Case) bool { return !slices.Contains(names, c.Name) })
}

// sandboxKind is one way to reach the sandbox directories of this
// machine: connect makes one connection (one server) for a test.
type sandboxKind struct {
	name    string
	connect func(t *testing.T, dir string) *sandboxConn
}

// sandboxConn is one connection to a sandbox whose files lie below dir.
type sandboxConn struct {
	// runner returns a Runner whose commands run in the sandbox directory
	// sub (below dir) unless they name another.
	runner func(sub string) sandbox.Runner
	// target is a stage Target over the sandbox; root returns the stage
	// root that lies at the host path p (below dir).
	target stage.Target
	root   func(p string) string
}

func dial(t *testing.T, addr string, cfg remote.Config) *remote.Host {
	t.Helper()
	h, err := remote.Dial(t.Context(), addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// inDir runs a Runner's commands in dir unless they name another.
type inDir struct {
	sandbox.Runner
	dir string
}

func (d inDir) Run(ctx context.Context, cmd sandbox.Command) error {
	if cmd.Dir == "" {
		cmd.Dir = d.dir
	}
	return d.Runner.Run(ctx, cmd)
}

// readerInDir keeps a FileReader visible through inDir.
type readerInDir struct {
	inDir
	fr sandbox.FileReader
}

func (r readerInDir) ReadFile(ctx context.Context, p string, limit int64) ([]byte, error) {
	return r.fr.ReadFile(ctx, p, limit)
}

func sandboxKinds() []sandboxKind {
	hostKind := func(name string, start func(t *testing.T, dir string) *remote.Host) sandboxKind {
		return sandboxKind{name: name, connect: func(t *testing.T, dir string) *sandboxConn {
			h := start(t, dir)
			return &sandboxConn{
				runner: func(sub string) sandbox.Runner { return readerInDir{inDir{h, sub}, h} },
				target: h,
				root:   func(p string) string { return p },
			}
		}}
	}
	local := func(t *testing.T, dir string) *sandboxConn {
		return &sandboxConn{
			runner: func(sub string) sandbox.Runner { return sandbox.Local(sub) },
			target: stage.NewBridge(sandbox.Local(dir)),
			root:   func(p string) string { return p },
		}
	}
	return []sandboxKind{
		{name: "dir", connect: func(t *testing.T, dir string) *sandboxConn {
			c := local(t, dir)
			d, err := stage.NewDir(dir)
			require.NoError(t, err)
			c.target = d
			c.root = func(p string) string {
				rel, err := filepath.Rel(dir, p)
				require.NoError(t, err)
				return "/" + filepath.ToSlash(rel)
			}
			return c
		}},
		{name: "bridge-local", connect: local},
		hostKind("remotetest", func(t *testing.T, dir string) *remote.Host {
			srv := remotetest.NewServer(t, remotetest.WithDir(dir))
			return dial(t, srv.Addr(), srv.Config())
		}),
		hostKind("sshd", func(t *testing.T, dir string) *remote.Host {
			srv := sshdtest.Start(t)
			return dial(t, srv.Addr(), srv.Config())
		}),
	}
}

// describe is hostiletree.Describe, failing t on error.
func describe(t *testing.T, dir, skip string) string {
	t.Helper()
	s, err := hostiletree.Describe(dir, skip)
	require.NoError(t, err)
	return s
}

// plantVictims creates, around the destination dst, what the hostile
// links of the table reach when followed: "outside" beside dst and beside
// its parent, and "missing-outside" never (it stays dangling).
func plantVictims(t *testing.T, dst string) {
	for _, d := range []string{filepath.Dir(dst), filepath.Dir(filepath.Dir(dst))} {
		writeFiles(t, d, map[string]string{"outside/victim": "VICTIM", "etc-victim": "VICTIM"})
	}
}

func TestHostileStage(t *testing.T) {
	for _, sk := range sandboxKinds() {
		t.Run(sk.name, func(t *testing.T) {
			base := t.TempDir()
			sb := filepath.Join(base, "sandbox")
			require.NoError(t, os.MkdirAll(sb, 0o755))
			conn := sk.connect(t, sb)
			cases := hostileCases()
			if sk.name == "sshd" {
				cases = overSSHD(cases, "through-a-link", "fifo-socket")
			}
			for _, c := range cases {
				t.Run(c.Name, func(t *testing.T) {
					policies := []stage.LinkPolicy{stage.SkipLinks, stage.FollowLinksWithin, stage.RejectLinks}
					if c.Big || sk.name == "sshd" {
						// The policies are the host's reading of the source,
						// the same over every target; sshd costs most a stage.
						policies = policies[:1]
					}
					for _, links := range policies {
						t.Run(links.String(), func(t *testing.T) { stageCase(t, conn, base, sb, c, links) })
					}
				})
			}
		})
	}
}

// stageCase stages each round of c from a host source under links into
// its own directory of the sandbox sb.
func stageCase(t *testing.T, conn *sandboxConn, base, sb string, c hostiletree.Case, links stage.LinkPolicy) {
	src := filepath.Join(base, "src", c.Name, links.String(), "asset")
	require.NoError(t, os.MkdirAll(src, 0o755))
	plantVictims(t, src)
	caseDir := filepath.Join(sb, c.Name, links.String())
	require.NoError(t, os.MkdirAll(caseDir, 0o755))
	plantVictims(t, filepath.Join(caseDir, "stage"))
	rootHost := filepath.Join(caseDir, "stage")
	target, root := conn.target, conn.root(rootHost)
	var last map[string]string // the copy of the last round that staged
	for ri, nodes := range c.Rounds {
		what := fmt.Sprintf("round %d (%v)", ri, links)
		require.NoError(t, hostiletree.Clear(src))
		require.NoError(t, hostiletree.Write(src, nodes))
		srcBefore := describe(t, filepath.Dir(src), "")
		outside := describe(t, caseDir, rootHost)
		rt, err := stage.Stage(context.Background(), target, root, []stage.Asset{{Name: "asset", Source: src, Links: links}})
		require.Equal(t, srcBefore, describe(t, filepath.Dir(src), ""), "%s: the stage changed its source", what)
		require.Equal(t, outside, describe(t, caseDir, rootHost), "%s: the stage wrote outside its root %s", what, rootHost)
		if out, err := hostiletree.LinksOutside(rootHost); assert.NoError(t, err) {
			assert.Empty(t, out, "%s: links in the sandbox's stage root that resolve outside it", what)
		}
		assert.Empty(t, leftovers(t, rootHost), "%s: leftovers in the stage root", what)
		hasLinks := slices.ContainsFunc(nodes, func(n hostiletree.Node) bool { return n.Type == hostiletree.Link })
		escapes, err2 := hostiletree.LinksOutside(src)
		require.NoError(t, err2)
		switch {
		case links == stage.RejectLinks && hasLinks, links == stage.FollowLinksWithin && len(escapes) > 0:
			require.ErrorIs(t, err, stage.ErrLink, "%s: staging a source with links (leaving it: %q)", what, escapes)
			if last != nil {
				require.Empty(t, treeDiff(last, fetched(t, target, root, "asset")), "%s: a refused stage must leave the previous copy", what)
			}
			continue
		}
		require.NoError(t, err, "%s: staging the hostile tree %s", what, c.Name)
		last = fetched(t, target, root, "asset")
		checkStaged(t, src, nodes, links, rt.Assets[0], last, what)
	}
}

// checkStaged fails t unless the staged copy got holds exactly what the
// source at src holds under the link policy: every regular file with its
// content, no link and no special file (each in Skipped), and under
// FollowLinksWithin a followed link's content only when it resolves inside
// src.
func checkStaged(t *testing.T, src string, nodes []hostiletree.Node, links stage.LinkPolicy, sa stage.StagedAsset, got map[string]string, what string) {
	t.Helper()
	realSrc, err := filepath.EvalSymlinks(src)
	require.NoError(t, err)
	for p, v := range got {
		if strings.HasPrefix(v, "-> ") {
			t.Errorf("%s: the staged copy holds %q as a %s: stage must never stage a link or a special file", what, p, strings.TrimPrefix(v, "-> "))
			continue
		}
		where, err := hostiletree.Resolve(filepath.Join(realSrc, filepath.FromSlash(p)))
		require.NoError(t, err)
		if where == "" || !(where == realSrc || strings.HasPrefix(where, realSrc+"/")) {
			t.Errorf("%s: the staged copy holds %q, which in the source resolves to %s, outside the source: stage followed a link out", what, p, where)
			continue
		}
		b, err := os.ReadFile(where)
		if err == nil && string(b) != v {
			t.Errorf("%s: the staged %q differs from the source file it stands for", what, p)
		}
	}
	for _, n := range nodes {
		switch n.Type {
		case hostiletree.File, hostiletree.HardLink:
			if _, ok := got[n.Path]; !ok {
				t.Errorf("%s: the regular file %q did not arrive", what, n.Path)
			}
		case hostiletree.Link:
			if links == stage.SkipLinks {
				if _, ok := got[n.Path]; ok {
					t.Errorf("%s: the link %q was staged under SkipLinks", what, n.Path)
				}
				if !slices.Contains(sa.Skipped, n.Path) {
					t.Errorf("%s: the link %q is not in Skipped %q", what, n.Path, sa.Skipped)
				}
			}
		case hostiletree.FIFO, hostiletree.Socket:
			if _, ok := got[n.Path]; ok {
				t.Errorf("%s: the special file %q was staged", what, n.Path)
			}
			if !slices.Contains(sa.Skipped, n.Path) {
				t.Errorf("%s: the special file %q is not in Skipped %q", what, n.Path, sa.Skipped)
			}
		}
	}
}

// hostileWork is a host work tree (git or plain) at base/host/local with
// one file, and a sandbox directory base/sandbox run by sk.
func hostileWork(t *testing.T, base, kind string, conn *sandboxConn) (workspace.Spec, []workspace.Option) {
	sb := filepath.Join(base, "sandbox")
	require.NoError(t, os.MkdirAll(sb, 0o755))
	spec := workspace.Spec{Local: filepath.Join(base, "host", "local"), Remote: filepath.Join(sb, "work"), Runner: conn.runner(sb)}
	var opts []workspace.Option
	if kind == "git" {
		newRepo(t, spec.Local, map[string]string{"README": "readme\n"})
	} else {
		require.NoError(t, os.MkdirAll(spec.Local, 0o755))
		writeFiles(t, spec.Local, map[string]string{"README": "readme\n"})
		opts = append(opts, workspace.WithStateDir(filepath.Join(base, "state"))) // outside base/host, which must not change
	}
	plantVictims(t, spec.Local)
	return spec, opts
}

func TestHostileRestore(t *testing.T) {
	kinds := sandboxKinds()[1:3] // a LocalRunner and an SSH runner (remotetest); sshd runs the link cases below
	for _, sk := range kinds {
		t.Run(sk.name, func(t *testing.T) {
			top := t.TempDir()
			conn := sk.connect(t, top)
			for _, kind := range []string{"git", "plain"} {
				t.Run(kind, func(t *testing.T) {
					for _, c := range hostileCases() {
						t.Run(c.Name, func(t *testing.T) { restoreCase(t, kind, conn, top, c) })
					}
				})
			}
		})
	}
}

// TestHostileRestoreSSHD runs the cases of overSSHD over a real sshd.
func TestHostileRestoreSSHD(t *testing.T) {
	top := t.TempDir()
	conn := sandboxKinds()[3].connect(t, top)
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			for _, c := range overSSHD(hostiletree.Cases(), "through-a-link", "fifo-socket") {
				t.Run(c.Name, func(t *testing.T) { restoreCase(t, kind, conn, top, c) })
			}
		})
	}
}

// TestHostileRestoreCommitted has the agent commit each round of every
// case (git add -A and commit in the sandbox, where git accepts the tree)
// before the Restore: the commits' trees must meet the same checks as the
// work tree.
func TestHostileRestoreCommitted(t *testing.T) {
	top := t.TempDir()
	conn := sandboxKinds()[1].connect(t, top)
	for _, c := range hostiletree.Cases() {
		t.Run(c.Name, func(t *testing.T) { restoreRounds(t, "git", conn, top, c, true) })
	}
}

// restoreCase prepares a round, leaves each round of c in the sandbox's
// work tree and restores it, checking the host after each.
func restoreCase(t *testing.T, kind string, conn *sandboxConn, top string, c hostiletree.Case) {
	restoreRounds(t, kind, conn, top, c, false)
}

// restoreRounds is restoreCase; with commit, the agent commits each round
// first.
func restoreRounds(t *testing.T, kind string, conn *sandboxConn, top string, c hostiletree.Case, commit bool) {
	base, err := os.MkdirTemp(top, "case-")
	require.NoError(t, err)
	spec, opts := hostileWork(t, base, kind, conn)
	hostDir := filepath.Dir(spec.Local)
	for ri, nodes := range c.Rounds {
		what := fmt.Sprintf("round %d of %s (%s)", ri, c.Name, kind)
		r, err := workspace.Prepare(context.Background(), spec, opts...)
		require.NoError(t, err, "%s: Prepare", what)
		require.NoError(t, hostiletree.Clear(spec.Remote, ".git", sandbox.RuntimeDir, "README"))
		require.NoError(t, hostiletree.Write(spec.Remote, nodes))
		committed := false
		if commit {
			if out, err := gitErr(spec.Remote, "add", "-A"); err != nil {
				t.Logf("%s: the sandbox's git does not add the tree (%v: %s); it stays uncommitted", what, err, strings.TrimSpace(out))
			} else if out, err := gitErr(spec.Remote, "commit", "-q", "--allow-empty", "-m", what); err != nil {
				t.Logf("%s: the sandbox's git does not commit the tree (%v: %s)", what, err, strings.TrimSpace(out))
			} else {
				committed = true
			}
		}
		outside := describe(t, hostDir, spec.Local)
		var head string
		if kind == "git" {
			head = gitIn(t, spec.Local, "rev-parse", "HEAD")
		}
		res, err := r.Restore(context.Background())
		require.NoError(t, err, "%s: the Restore of a hostile work tree must refuse entries, not fail", what)
		require.Equal(t, outside, describe(t, hostDir, spec.Local), "%s: the Restore wrote outside the work tree %s", what, spec.Local)
		out, err := hostiletree.LinksOutside(spec.Local, ".git", sandbox.RuntimeDir)
		require.NoError(t, err)
		assert.Empty(t, out, "%s: links on the host that resolve outside the work tree (or into .git or the runtime directory)", what)
		assert.Empty(t, res.Kept, "%s: nothing local changed, so nothing may be Kept", what)
		checkArrived(t, spec.Local, nodes, res, what)
		if kind == "git" {
			checkRepo(t, spec.Local)
			if !committed {
				require.Equal(t, head, gitIn(t, spec.Local, "rev-parse", "HEAD"), "%s: the agent committed nothing: HEAD stays", what)
			} else {
				t.Logf("%s: HEAD %s -> %s (sandbox %s), %d commits, refused %q", what, strings.TrimSpace(head),
					strings.TrimSpace(gitIn(t, spec.Local, "rev-parse", "HEAD")), strings.TrimSpace(gitIn(t, spec.Remote, "rev-parse", "HEAD")), res.Commits, res.Refused)
			}
		}
		assert.Empty(t, leftovers(t, base), "%s: leftovers on the host or in the sandbox", what)
	}
}

// refusedCovers reports whether p or one of its parents is in refused.
func refusedCovers(refused []string, p string) bool {
	for q := p; q != "." && q != "/" && q != ""; q = path.Dir(q) {
		if slices.Contains(refused, q) {
			return true
		}
	}
	return false
}

// checkArrived fails t unless every node of the sandbox's tree either
// arrived on the host exactly (type, content, link text; without setuid,
// setgid or sticky bits, which put it in Refused too) or is covered by
// Refused; FIFOs, sockets and hard links never arrive as such; and every
// other host entry (README aside) is a directory or covered by Refused.
func checkArrived(t *testing.T, local string, nodes []hostiletree.Node, res *workspace.Result, what string) {
	t.Helper()
	want := map[string]hostiletree.Node{}
	for _, n := range nodes {
		want[n.Path] = n
		for d := path.Dir(n.Path); d != "."; d = path.Dir(d) {
			if _, ok := want[d]; !ok {
				want[d] = hostiletree.Node{Path: d, Type: hostiletree.Dir}
			}
		}
	}
	// A directory must arrive when something below it must (git keeps no
	// empty directory; one whose entries were all refused may be absent).
	needDir := map[string]bool{}
	for p, n := range want {
		if n.Type != hostiletree.Dir && !refusedCovers(res.Refused, p) {
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				needDir[d] = true
			}
		}
	}
	for p, n := range want {
		if refusedCovers(res.Refused, p) || (n.Type == hostiletree.Dir && !needDir[p]) {
			continue
		}
		hp := filepath.Join(local, filepath.FromSlash(p))
		fi, err := os.Lstat(hp)
		if err != nil {
			t.Errorf("%s: the sandbox's %s %q did not arrive (%v) and is not in Refused %q", what, n.Type, p, err, res.Refused)
			continue
		}
		bad := ""
		switch n.Type {
		case hostiletree.File:
			if !fi.Mode().IsRegular() {
				bad = "not a regular file: " + fi.Mode().Type().String()
			} else if b, err := os.ReadFile(hp); err != nil || string(b) != n.Data {
				bad = "other content"
			} else if n.Mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
				bad = fmt.Sprintf("a file with mode %v that is not in Refused", n.Mode)
			}
			if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
				t.Errorf("%s: %q was written on the host with mode %v", what, p, fi.Mode())
			}
		case hostiletree.Dir:
			if !fi.IsDir() {
				bad = "not a directory: " + fi.Mode().Type().String()
			}
		case hostiletree.Link:
			if fi.Mode()&fs.ModeSymlink == 0 {
				bad = "not a link: " + fi.Mode().Type().String()
			} else if tg, err := os.Readlink(hp); err != nil || tg != n.Target {
				bad = fmt.Sprintf("a link to %q", tg)
			}
		default: // FIFO, socket, hard link, sparse: never as they are
			bad = "a " + n.Type.String() + " must be refused"
		}
		if bad != "" {
			t.Errorf("%s: the sandbox's %s %q is on the host as %s, and it is not in Refused %q", what, n.Type, p, bad, res.Refused)
		}
	}
	// Nothing else: what the sandbox does not hold is gone from the host
	// unless refused, a directory, or the host's own.
	err := filepath.WalkDir(local, func(hp string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(local, hp)
		p := filepath.ToSlash(rel)
		if p == ".git" || p == sandbox.RuntimeDir {
			return filepath.SkipDir
		}
		if _, ok := want[p]; ok || p == "." || p == "README" || de.IsDir() || refusedCovers(res.Refused, p) {
			return nil
		}
		t.Errorf("%s: the host holds %q (%v), which the sandbox does not, and it is not in Refused", what, p, de.Type())
		return nil
	})
	require.NoError(t, err)
}

// maxRSS is this process's peak resident set in bytes.
func maxRSS(t *testing.T) int64 {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return ru.Maxrss << 10
}

// TestHostileSparseRestore: a sparse 1 GiB file in the sandbox against
// WithMaxBytes(1 MiB) is refused (ErrTooLarge, or listed in Refused with
// the rest arriving) without the host reading it into memory.
//
// For a git work tree the sandbox's own git reads the whole file (git add
// hashes it: about 30 s for 1 GiB on a loaded 2-core machine), so CI uses a
// 64 MiB sparse file there, and AIRLOCK_HOSTILE=full the 1 GiB one.
func TestHostileSparseRestore(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			c := hostiletree.SparseFile(1 << 30)
			if kind == "git" && os.Getenv("AIRLOCK_HOSTILE") != "full" {
				c = hostiletree.SparseFile(64 << 20)
			}
			t.Logf("the sandbox holds %s", c.Name)
			base := t.TempDir()
			spec, opts := hostileWork(t, base, kind, sandboxKinds()[1].connect(t, base))
			opts = append(opts, workspace.WithMaxBytes(1<<20))
			r, err := workspace.Prepare(context.Background(), spec, opts...)
			require.NoError(t, err)
			require.NoError(t, hostiletree.Write(spec.Remote, c.Rounds[0]))
			rss := maxRSS(t)
			before := files(t, spec.Local, ".git")
			res, err := r.Restore(context.Background())
			grew := maxRSS(t) - rss
			if err != nil {
				t.Logf("Restore: %v", err)
			} else {
				t.Logf("Restore refused %q", res.Refused)
			}
			t.Logf("peak RSS grew by %d MiB during the Restore", grew>>20)
			assert.Less(t, grew, int64(256<<20), "the Restore read the sparse file into memory")
			if err != nil {
				require.ErrorIs(t, err, workspace.ErrTooLarge)
				require.Equal(t, before, files(t, spec.Local, ".git"), "a Restore that failed with ErrTooLarge wrote something")
			} else {
				require.Contains(t, res.Refused, "huge.bin", "the file past WithMaxBytes must be refused")
				fi, err := os.Lstat(filepath.Join(spec.Local, "huge.bin"))
				require.ErrorIs(t, err, fs.ErrNotExist, "the file past WithMaxBytes was written (%v)", fi)
				require.Equal(t, "small", readFile(t, filepath.Join(spec.Local, "small")))
			}
			if kind == "git" {
				checkRepo(t, spec.Local)
			}
			assert.Empty(t, leftovers(t, filepath.Dir(spec.Local)), "leftovers on the host")
		})
	}
}

// TestHostileRegister registers every entry of every case from the sandbox
// (every runner): each must be refused (*RequestError) or stored with
// exactly its bytes; a link, a path through a link, a hard link, a FIFO
// or a socket is always refused, even with the right size and hash of
// what the link reaches.
func TestHostileRegister(t *testing.T) {
	cases := append(hostiletree.Cases(), hostiletree.SparseFile(1<<30))
	for _, sk := range sandboxKinds()[1:] {
		t.Run(sk.name, func(t *testing.T) {
			base := t.TempDir()
			sb := filepath.Join(base, "sandbox")
			require.NoError(t, os.MkdirAll(sb, 0o755))
			storeDir := filepath.Join(base, "store")
			store, err := deliverable.NewFileStore(afero.NewOsFs(), storeDir)
			require.NoError(t, err)
			reg := &deliverable.Registrar{Store: store}
			runner := sk.connect(t, sb).runner(sb)
			cases := cases
			if sk.name == "sshd" {
				cases = overSSHD(cases, "absolute", "hard-links", "fifo-socket")
			}
			for _, c := range cases {
				t.Run(c.Name, func(t *testing.T) {
					dir := filepath.Join(sb, c.Name)
					require.NoError(t, os.MkdirAll(dir, 0o755))
					require.NoError(t, hostiletree.Write(dir, c.Rounds[0]))
					plantVictims(t, dir)
					ws := deliverable.RemoteWorkspace(runner, dir)
					outside := describe(t, base, storeDir)
					for i, n := range c.Rounds[0] {
						for _, ref := range registerRefs(t, dir, n) {
							registerOne(t, reg, store, ws, dir, n, ref, fmt.Sprintf("%s-%d-%s", c.Name, i, ref))
						}
					}
					require.Equal(t, outside, describe(t, base, storeDir), "Register wrote outside its store")
					checkStore(t, storeDir, c.Name)
				})
			}
		})
	}
}

// registerRefs returns the ContentRefs to try for node n: its own path,
// and for a link to a directory a path through it to a file there.
func registerRefs(t *testing.T, dir string, n hostiletree.Node) []string {
	refs := []string{n.Path}
	if n.Type == hostiletree.Dir {
		return nil
	}
	if n.Type == hostiletree.Link {
		where, err := hostiletree.Resolve(filepath.Join(dir, filepath.FromSlash(n.Path)))
		require.NoError(t, err)
		if fi, err := os.Stat(where); err == nil && fi.IsDir() {
			ents, err := os.ReadDir(where)
			require.NoError(t, err)
			for _, e := range ents {
				if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 && fi.Size() < 1<<20 {
					refs = append(refs, n.Path+"/"+e.Name())
					break
				}
			}
		}
	}
	return refs
}

// registerOne registers ref, declaring the size and hash of what the path
// reaches when every link is followed (the strongest claim an agent can
// make), and checks the outcome.
func registerOne(t *testing.T, reg *deliverable.Registrar, store *deliverable.FileStore, ws deliverable.Workspace, dir string, n hostiletree.Node, ref, key string) {
	t.Helper()
	var data []byte
	size := int64(1)
	sum := strings.Repeat("0", 64)
	full := filepath.Join(dir, filepath.FromSlash(ref))
	if fi, err := os.Stat(full); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
		if size < 64<<20 {
			b, err := os.ReadFile(full)
			require.NoError(t, err)
			data = b
			s := sha256.Sum256(b)
			sum = hex.EncodeToString(s[:])
		}
	}
	req := deliverable.Request{ContentRef: ref, Filename: path.Base(ref), ContentType: "application/octet-stream", ByteSize: size,
		SHA256: sum, Title: "hostile", IdempotencyKey: key}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	rss := maxRSS(t)
	rc, err := reg.Register(ctx, ws, "task-h", "run-h", req)
	if grew := maxRSS(t) - rss; grew > 256<<20 {
		t.Errorf("Register %q: the peak RSS grew by %d MiB", ref, grew>>20)
	}
	require.NoError(t, ctx.Err(), "Register %q did not return within a minute (took %v)", ref, time.Since(start))
	linked := ref != n.Path || n.Type == hostiletree.Link
	switch {
	case err == nil:
		if linked || n.Type == hostiletree.HardLink || n.Type == hostiletree.FIFO || n.Type == hostiletree.Socket {
			t.Errorf("Register %q (a %s) was stored: it must be refused", ref, n.Type)
		}
		_, body, err := store.Open(context.Background(), rc.AttachmentID)
		require.NoError(t, err)
		got, err := io.ReadAll(body)
		require.NoError(t, err)
		require.NoError(t, body.Close())
		require.Equal(t, string(data), string(got), "Register %q stored other bytes than the file's", ref)
	default:
		var re *deliverable.RequestError
		if !errors.As(err, &re) {
			t.Errorf("Register %q (a %s): %v; want success or a *RequestError (the agent's doing), not a host failure", ref, n.Type, err)
			return
		}
		switch {
		case linked && !errors.Is(err, deliverable.ErrSymlinkDenied):
			t.Errorf("Register %q through a link: %v; want ErrSymlinkDenied", ref, err)
		case n.Type == hostiletree.HardLink && !errors.Is(err, deliverable.ErrHardlinkDenied):
			t.Errorf("Register %q, a hard link: %v; want ErrHardlinkDenied", ref, err)
		case n.Type == hostiletree.Sparse && !errors.Is(err, deliverable.ErrSizeDenied):
			t.Errorf("Register %q, 1 GiB: %v; want ErrSizeDenied", ref, err)
		}
	}
	if n.Type == hostiletree.Sparse {
		// A size under the limit that the file does not have: refused
		// from the sandbox's report, before any content is read.
		req.ByteSize, req.IdempotencyKey = 1<<20, key+"-small"
		rss := maxRSS(t)
		_, err := reg.Register(ctx, ws, "task-h", "run-h", req)
		require.ErrorIs(t, err, deliverable.ErrSizeMismatch, "Register %q declared 1 MiB, 1 GiB on disk", ref)
		if grew := maxRSS(t) - rss; grew > 256<<20 {
			t.Errorf("Register %q declared 1 MiB: the peak RSS grew by %d MiB", ref, grew>>20)
		}
	}
}
