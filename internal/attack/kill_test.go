package attack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/internal/treegen"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/workspace"
)

// Kills: the host process is SIGKILLed (with every process it started) at
// random points of Stage, Prepare and Restore; the same operation run
// again must then succeed, leave a consistent state (git fsck --strict,
// every file and commit of the sandbox arrived, the staged copy whole and
// equal to its source) and no leftover. AIRLOCK_KILLS=full raises the
// kills per operation and kind from 5 to 30; AIRLOCK_KILL_SEED replays
// the kill points a failed run logged.

// TestKillChild is the child's side of the harness: it does nothing
// unless the test binary was started by startChild.
func TestKillChild(t *testing.T) {
	role := os.Getenv(childRoleEnv)
	if role == "" {
		return
	}
	base, arg := os.Getenv(childDirEnv), os.Getenv(childArgEnv)
	ctx := context.Background()
	var err error
	switch role {
	case "stage":
		target, root := stageTarget(t, base, arg)
		childSay("start")
		_, err = stage.Stage(ctx, target, root, stageAssets(base))
	case "prepare":
		spec, opts := workSpec(base, arg)
		childSay("start")
		var r *workspace.Round
		if r, err = workspace.Prepare(ctx, spec, opts...); err == nil {
			childSay("round %s", r.ID())
		}
	case "restore":
		kind, id, _ := strings.Cut(arg, ":")
		spec, opts := workSpec(base, kind)
		childSay("start")
		var r *workspace.Round
		if r, err = workspace.Reopen(ctx, spec, id, opts...); err == nil {
			_, err = r.Restore(ctx)
		}
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		childSay("error %v", err)
		t.Fatalf("%s: %v", role, err)
	}
	childSay("done")
}

// stageTarget returns the Target of kind ("dir": stage.NewDir; "bridge":
// stage.NewBridge over stage.LocalRunner; "sshd|addr|user|key|known_hosts":
// remote.Host over a real sshd, which outlives the child) over
// base/sandbox-<kind>, and the stage root in it.
func stageTarget(t testing.TB, base, kind string) (stage.Target, string) {
	if rest, ok := strings.CutPrefix(kind, "sshd|"); ok {
		sb := filepath.Join(base, "sandbox-sshd")
		require.NoError(t, os.MkdirAll(sb, 0o755))
		f := strings.Split(rest, "|")
		require.Len(t, f, 4, "sshd target %q", kind)
		key, err := os.ReadFile(f[2])
		require.NoError(t, err)
		signer, err := ssh.ParsePrivateKey(key)
		require.NoError(t, err)
		hk, err := knownhosts.New(f[3])
		require.NoError(t, err)
		h, err := remote.Dial(context.Background(), f[0], remote.Config{User: f[1], Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: hk})
		require.NoError(t, err, "dialing sshd at %s", f[0])
		t.Cleanup(func() { _ = h.Close() })
		return h, filepath.Join(sb, "stage")
	}
	sb := filepath.Join(base, "sandbox-"+kind)
	require.NoError(t, os.MkdirAll(sb, 0o755))
	switch kind {
	case "dir":
		d, err := stage.NewDir(sb)
		require.NoError(t, err)
		return d, "/stage"
	case "bridge":
		return stage.NewBridge(sandbox.Local(sb)), filepath.Join(sb, "stage")
	}
	t.Fatalf("unknown stage target %q", kind)
	return nil, ""
}

// stageRootDir is where the stage root of kind lies on this machine.
func stageRootDir(base, kind string) string {
	return filepath.Join(stageSandbox(base, kind), "stage")
}

// stageSandbox is the sandbox directory of kind on this machine.
func stageSandbox(base, kind string) string {
	if strings.HasPrefix(kind, "sshd|") {
		kind = "sshd"
	}
	return filepath.Join(base, "sandbox-"+kind)
}

func stageAssets(base string) []stage.Asset {
	return []stage.Asset{
		{Name: "skills", Source: filepath.Join(base, "src", "skills")},
		{Name: "tools", Source: filepath.Join(base, "src", "tools")},
	}
}

func TestKillStage(t *testing.T) {
	for _, kind := range []string{"dir", "bridge", "sshd"} {
		t.Run(kind, func(t *testing.T) {
			if kind == "sshd" {
				srv := sshdtest.Start(t)
				kind = strings.Join([]string{"sshd", srv.Addr(), srv.User(), srv.KeyFile(), srv.KnownHostsFile()}, "|")
			}
			base := t.TempDir()
			for _, a := range stageAssets(base) {
				require.NoError(t, os.MkdirAll(a.Source, 0o755))
			}
			_, err := treegen.Write(stageAssets(base)[0].Source, treegen.Shape{Dirs: 4, Files: 60, MinBytes: 256, MaxBytes: 8 << 10, Large: 1, Large1: 4 << 20, Seed: 7})
			require.NoError(t, err)
			_, err = treegen.Write(stageAssets(base)[1].Source, treegen.Shape{Dirs: 2, Files: 30, MinBytes: 256, MaxBytes: 4 << 10, Seed: 8})
			require.NoError(t, err)
			var layout []string // the stage root's names after a clean stage
			n := killCount()
			if strings.HasPrefix(kind, "sshd|") && n < 30 {
				n = 1 // each sshd command costs a login; dir and bridge make the 5
			}
			killLoop(t, n, "stage", base, func(i int) string {
				// Every round changes content, so that every stage publishes.
				for _, a := range stageAssets(base) {
					writeFiles(t, a.Source, map[string]string{
						"skill-00/round.txt":                      fmt.Sprintf("round %d\n", i),
						fmt.Sprintf("skill-01/added-%02d.txt", i): strings.Repeat("a", 1000+i),
						"skill-00/reference/deep/ref-001.md":      fmt.Sprintf("changed in round %d\n", i),
					})
				}
				if i > 1 {
					require.NoError(t, os.Remove(filepath.Join(stageAssets(base)[0].Source, fmt.Sprintf("skill-01/added-%02d.txt", i-2))))
				}
				return kind
			}, func(i int, c *child, killed bool) {
				// The sandbox's side of the killed stage (sshd's session
				// processes) ends on its own once the connection is gone.
				quiet(t, stageSandbox(base, kind))
				target, root := stageTarget(t, base, kind)
				rt, err := stage.Stage(context.Background(), target, root, stageAssets(base))
				require.NoError(t, err, "the stage after the kill")
				for j, a := range stageAssets(base) {
					require.Empty(t, treeDiff(files(t, a.Source), fetched(t, target, root, a.Name)), "the staged copy of %s after the recovery run: whole and equal to its source", a.Name)
					require.Equal(t, filepath.Join(root, a.Name), rt.Assets[j].Path)
				}
				quiet(t, stageSandbox(base, kind)) // what the stage left running in the sandbox has ended
				names := dirNames(t, stageRootDir(base, kind))
				if layout == nil {
					layout = names
				}
				for _, n := range names {
					if !slices.Contains(layout, n) {
						t.Errorf("run %d: the stage root %s holds %s after the recovery run: a leftover no stage swept (defect 7)", i, stageRootDir(base, kind), n)
						// Judge each kill on its own.
						require.NoError(t, os.RemoveAll(filepath.Join(stageRootDir(base, kind), n)))
					}
				}
				assert.Empty(t, leftovers(t, stageSandbox(base, kind)), "run %d: leftovers in the sandbox after the recovery run", i)
			})
		})
	}
}

// dirNames lists the names in dir, sorted.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}

// workSpec is the workspace of kind ("git" or "plain") under base: the
// host work tree base/<kind>/local, the sandbox base/<kind>/sandbox/work
// run by a LocalRunner, and for a plain one the state directory
// base/<kind>/state.
func workSpec(base, kind string) (workspace.Spec, []workspace.Option) {
	k := filepath.Join(base, kind)
	spec := workspace.Spec{
		Local:  filepath.Join(k, "local"),
		Remote: filepath.Join(k, "sandbox", "work"),
		Runner: sandbox.Local(filepath.Join(k, "sandbox")),
	}
	var opts []workspace.Option
	if kind == "plain" {
		opts = append(opts, workspace.WithStateDir(filepath.Join(k, "state")))
	}
	return spec, opts
}

// newWork creates the host work tree of kind under base: 150 small files
// in 5 directories (committed, for git).
func newWork(t *testing.T, base, kind string) workspace.Spec {
	spec, _ := workSpec(base, kind)
	fs := map[string]string{"README": "readme\n"}
	for i := range 150 {
		fs[fmt.Sprintf("src/d%d/f%03d.txt", i%5, i)] = strings.Repeat(fmt.Sprintf("line %d\n", i), 20)
	}
	if kind == "git" {
		newRepo(t, spec.Local, fs)
	} else {
		require.NoError(t, os.MkdirAll(spec.Local, 0o755))
		writeFiles(t, spec.Local, fs)
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(spec.Remote), 0o755))
	return spec
}

// checkWork fails t unless the host work tree and the sandbox hold the
// same files (links included; .git and the runtime directory aside), the
// host repository is consistent, and no leftover is found on either side
// or in the state directory.
func checkWork(t *testing.T, base, kind, what string) {
	t.Helper()
	spec, _ := workSpec(base, kind)
	checkSpec(t, spec, kind, filepath.Join(base, kind, "state"), what)
}

// checkSpec is checkWork for any spec; state is the plain kind's state
// directory ("" for none).
func checkSpec(t *testing.T, spec workspace.Spec, kind, state, what string) {
	t.Helper()
	require.Empty(t, treeDiff(withoutLeftovers(files(t, spec.Remote, ".git", sandbox.RuntimeDir)), withoutLeftovers(files(t, spec.Local, ".git", sandbox.RuntimeDir))),
		"%s: the host work tree %s must hold exactly the sandbox's files (want: the sandbox's)", what, spec.Local)
	if kind == "git" {
		require.Equal(t, gitIn(t, spec.Remote, "rev-parse", "HEAD"), gitIn(t, spec.Local, "rev-parse", "HEAD"), "%s: HEAD on both sides", what)
		checkRepo(t, spec.Local)
		gitIn(t, spec.Remote, "status", "--porcelain")
	}
	assert.Empty(t, leftovers(t, spec.Local), "%s: leftovers in the host work tree (or its .git)", what)
	assert.Empty(t, leftovers(t, filepath.Dir(spec.Remote)), "%s: leftovers in the sandbox", what)
	if state != "" {
		assert.Empty(t, leftovers(t, state), "%s: leftovers in the state directory", what)
	}
}

func TestKillPrepare(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			base := t.TempDir()
			spec := newWork(t, base, kind)
			killLoop(t, killCount(), "prepare", base, func(i int) string {
				writeFiles(t, spec.Local, map[string]string{
					"README":                          fmt.Sprintf("round %d\n", i),
					fmt.Sprintf("new/r%02d.txt", i):   strings.Repeat("n", 3000),
					fmt.Sprintf("dirty/u%02d.txt", i): "untracked\n",
				})
				if kind == "git" && i%2 == 0 {
					gitIn(t, spec.Local, "add", "README", "new")
					gitIn(t, spec.Local, "commit", "-q", "-m", fmt.Sprintf("round %d", i))
				}
				return kind
			}, func(i int, c *child, killed bool) {
				spec, opts := workSpec(base, kind)
				r, err := workspace.Prepare(context.Background(), spec, opts...)
				require.NoError(t, err, "the Prepare after the kill")
				checkWork(t, base, kind, "after the recovery Prepare")
				// The recovered round restores: nothing changed, nothing lost.
				_, err = r.Restore(context.Background())
				require.NoError(t, err, "restoring the recovered round")
				checkWork(t, base, kind, "after restoring the recovered round")
			})
		})
	}
}

func TestKillRestore(t *testing.T) {
	for _, kind := range []string{"git", "plain"} {
		t.Run(kind, func(t *testing.T) {
			base := t.TempDir()
			newWork(t, base, kind)
			killLoop(t, killCount(), "restore", base, func(i int) string {
				spec, opts := workSpec(base, kind)
				r, err := workspace.Prepare(context.Background(), spec, opts...)
				require.NoError(t, err, "preparing round %d", i)
				// The agent's work: a commit (git) of 40 new files and an
				// edit, 10 untracked files, a deletion.
				agent := map[string]string{"README": fmt.Sprintf("agent round %d\n", i)}
				for j := range 40 {
					agent[fmt.Sprintf("agent/r%02d/f%02d.txt", i, j)] = strings.Repeat(fmt.Sprintf("%d-%d ", i, j), 500)
				}
				writeFiles(t, spec.Remote, agent)
				require.NoError(t, os.Remove(filepath.Join(spec.Remote, "src", "d0", fmt.Sprintf("f%03d.txt", i*5))))
				if kind == "git" {
					gitIn(t, spec.Remote, "add", "-A") // .airlock is ignored (info/exclude)
					gitIn(t, spec.Remote, "commit", "-q", "-m", fmt.Sprintf("agent round %d", i))
				}
				u := map[string]string{}
				for j := range 10 {
					u[fmt.Sprintf("agent/r%02d/untracked-%02d.txt", i, j)] = fmt.Sprintf("untracked %d %d\n", i, j)
				}
				writeFiles(t, spec.Remote, u)
				return kind + ":" + r.ID()
			}, func(i int, c *child, killed bool) {
				_, id, _ := strings.Cut(c.arg, ":")
				spec, opts := workSpec(base, kind)
				r, err := workspace.Reopen(context.Background(), spec, id, opts...)
				require.NoError(t, err, "reopening round %s after the kill", id)
				res, err := r.Restore(context.Background())
				require.NoError(t, err, "the Restore of round %s after the kill", id)
				for _, p := range res.Refused {
					if strings.HasPrefix(p, sandbox.RuntimeDir+"/") {
						continue // the runtime directory never comes back; a leftover there is found below
					}
					t.Errorf("the recovery Restore refused %q: nothing of the agent's work may be refused", p)
				}
				checkWork(t, base, kind, "after the recovery Restore")
			})
		})
	}
}
