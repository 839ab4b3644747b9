package stage_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// TestBridgeSweepsCutTransfers: a publish's setup removes the temporary
// directories whose owner process is gone: transfers whose tar died before
// the stream ended, and complete ones whose host was killed before the
// publish (issue 18, defect 7: these used to stay forever). It leaves every
// other one: a transfer not yet begun, one still running, and whatever a
// hostile sandbox planted (a link to a directory outside, an owner file
// that is a link or holds junk). Nothing outside the root is touched.
func TestBridgeSweepsCutTransfers(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "rt")
	outside := filepath.Join(base, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(outside, "keep"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "owner"), []byte(deadPID(t)+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "keep", "f"), []byte("outside"), 0o644))

	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("1"), 0o644))
	b := stage.NewBridge(sandbox.Local(""))
	_, err := stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)

	live := exec.Command("sleep", "60")
	require.NoError(t, live.Start())
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })

	dead := deadPID(t)
	plant := func(name, owner string, complete bool) {
		d := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Join(d, "new", "tree"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(d, "new", "tree", "f"), []byte(name), 0o644))
		if owner != "" {
			require.NoError(t, os.WriteFile(filepath.Join(d, "owner"), []byte(owner), 0o644))
		}
		if complete {
			require.NoError(t, os.WriteFile(filepath.Join(d, "complete"), nil, 0o644))
		}
	}
	plant(".airlock-tmp-x-cut", dead+"\n", false)
	plant(".airlock-tmp-other-cut", dead, false) // another asset's, no newline
	plant(".airlock-tmp-x-notbegun", "", false)
	plant(".airlock-tmp-x-running", strconv.Itoa(live.Process.Pid)+"\n", false)
	plant(".airlock-tmp-x-killedbeforepublish", dead+"\n", true)
	plant(".airlock-tmp-x-junk", "1; rm -rf /\n", false)
	require.NoError(t, os.Symlink(outside, filepath.Join(root, ".airlock-tmp-x-link")))
	linked := filepath.Join(root, ".airlock-tmp-x-ownerlink")
	require.NoError(t, os.MkdirAll(linked, 0o700))
	require.NoError(t, os.Symlink(filepath.Join(outside, "owner"), filepath.Join(linked, "owner")))

	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("2"), 0o644))
	_, err = stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)

	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	assert.Equal(t, []string{
		".airlock-manifest-x.json",
		".airlock-stamps-x",
		".airlock-tmp-x-junk",
		".airlock-tmp-x-link",
		".airlock-tmp-x-notbegun",
		".airlock-tmp-x-ownerlink",
		".airlock-tmp-x-running",
		"x",
	}, names)
	got, err := os.ReadFile(filepath.Join(outside, "keep", "f"))
	require.NoError(t, err)
	assert.Equal(t, "outside", string(got))
	got, err = os.ReadFile(filepath.Join(root, "x", "a"))
	require.NoError(t, err)
	assert.Equal(t, "2", string(got))
}

// deadPID returns the id of a process that has ended.
func deadPID(t *testing.T) string {
	t.Helper()
	c := exec.Command("true")
	require.NoError(t, c.Run())
	return strconv.Itoa(c.Process.Pid)
}

// TestBridgeSweepsOwnersOfOtherPIDNamespaces: an engine that gives every
// exec a PID namespace of its own (bwrap --unshare-pid) records owners
// whose pids mean nothing in the next exec's namespace, where the same
// small pid is often a live process of the sweeper's own. An owner file
// that names another PID namespace is swept even though its pid is alive
// here; one that names this namespace, or none, is judged by its pid as
// before. (TestBwrapTarget's CancelKeepsPreviousCopy left such a directory
// behind when the pids collided.)
func TestBridgeSweepsOwnersOfOtherPIDNamespaces(t *testing.T) {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skipf("this machine does not show PID namespaces (/proc/self/ns/pid: %v)", err)
	}
	root := filepath.Join(t.TempDir(), "rt")
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("1"), 0o644))
	b := stage.NewBridge(sandbox.Local(""))
	_, err = stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)

	live := exec.Command("sleep", "60")
	require.NoError(t, live.Start())
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	pid := strconv.Itoa(live.Process.Pid)
	for name, owner := range map[string]string{
		".airlock-tmp-x-foreign": pid + "\npid:[1]\n", // alive here, but another namespace's
		".airlock-tmp-x-ours":    pid + "\n" + ns + "\n",
		".airlock-tmp-x-old":     pid + "\n", // written before the namespace line
	} {
		d := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Join(d, "new", "tree"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(d, "owner"), []byte(owner), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("2"), 0o644))
	_, err = stage.Stage(t.Context(), b, root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	assert.Equal(t, []string{".airlock-manifest-x.json", ".airlock-stamps-x", ".airlock-tmp-x-old", ".airlock-tmp-x-ours", "x"}, names)

	// The owner files airlock writes carry the namespace.
	for _, n := range []string{".airlock-tmp-x-old", ".airlock-tmp-x-ours"} {
		require.NoError(t, os.RemoveAll(filepath.Join(root, n)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("3"), 0o644))
	var owners []string
	spy := ownerSpy{Runner: sandbox.Local(""), root: root, owners: &owners}
	_, err = stage.Stage(t.Context(), stage.NewBridge(spy, stage.TwoSessions()), root, []stage.Asset{{Name: "x", Source: src}})
	require.NoError(t, err)
	require.NotEmpty(t, owners, "a publish claimed a temporary directory")
	for _, o := range owners {
		assert.Regexp(t, `^[0-9]+\n`+regexp.QuoteMeta(ns)+`\n$`, o)
	}
}

// ownerSpy reads every owner file under root after each command.
type ownerSpy struct {
	sandbox.Runner
	root   string
	owners *[]string
}

func (s ownerSpy) Run(ctx context.Context, cmd sandbox.Command) error {
	err := s.Runner.Run(ctx, cmd)
	ms, _ := filepath.Glob(filepath.Join(s.root, ".airlock-tmp-*", "owner"))
	for _, m := range ms {
		if b, rerr := os.ReadFile(m); rerr == nil {
			*s.owners = append(*s.owners, string(b))
		}
	}
	return err
}
