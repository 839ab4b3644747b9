package skills

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/tree"
)

// The tests of an outside attack on Materialize (twelfth session).

// TestMaterializeFileMovedWhileCopied: a file moved back and forth between
// two directories of a skill while it is copied is in every bundle
// Materialize returns, once; a tree that never holds still fails with
// ErrChanged. The copy's own checks see a file that changes while it is
// read, not one that leaves a directory not yet listed for one already
// listed: before copyStill's second pass, most of these calls returned a
// bundle without the file.
func TestMaterializeFileMovedWhileCopied(t *testing.T) {
	extra := []string{"B/x:the moving file"}
	for i := range 400 {
		extra = append(extra, fmt.Sprintf("A/f%03d:%s", i, strings.Repeat("a", 2000)), fmt.Sprintf("C/f%03d:%s", i, strings.Repeat("c", 2000)))
	}
	dir := skillDir(t, t.TempDir(), "mv", extra...)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
			from, to := "B/x", "A/x"
			if i%2 == 1 {
				from, to = to, from
			}
			if err := os.Rename(filepath.Join(dir, from), filepath.Join(dir, to)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	state := t.TempDir()
	var ok, changed int
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		b, err := Materialize(context.Background(), state, []Source{{Key: "k", Name: "mv", Dir: dir}})
		if err != nil {
			require.ErrorIs(t, err, ErrChanged)
			changed++
			continue
		}
		ok++
		var found []string
		for _, p := range []string{"A/x", "B/x"} {
			if _, err := os.Lstat(filepath.Join(b.Dir, "mv", p)); err == nil {
				found = append(found, p)
			}
		}
		require.Len(t, found, 1, "a returned bundle holds the moving file once: %v", found)
		require.Equal(t, 802, b.Skills[0].Files)
	}
	t.Logf("%d bundles, %d ErrChanged", ok, changed)
}

// TestHeldStill: a copy is taken when no directory changed since the
// pass before it (tree.Seen.Still) and it holds what the pass counted; a
// copy short of a file, or a tree where a file moved between two
// directories after the pass (the counts agree), is ErrChanged.
func TestHeldStill(t *testing.T) {
	dir := skillDir(t, t.TempDir(), "a", "d/x:x", "e/")
	ctx := context.Background()
	md, seen := tree.FingerprintSeen(ctx, dir, tree.Options{}, time.Now(), 100)
	pass := sourcePass{md: md, seen: seen}
	res, err := tree.Copy(ctx, dir, filepath.Join(t.TempDir(), "copy"), tree.Options{Seen: seen})
	require.NoError(t, err)
	require.NoError(t, heldStill(dir, pass, res.Manifest, 1), "a quiet tree")

	torn := res.Manifest
	torn.Entries = nil
	for _, e := range res.Manifest.Entries {
		if e.Path != "d/x" {
			torn.Entries = append(torn.Entries, e)
		}
	}
	err = heldStill(dir, pass, torn, 2)
	require.ErrorIs(t, err, ErrChanged)
	assert.Contains(t, err.Error(), fmt.Sprintf("while the skill was copied (copy 2 of at most 3; 1 files, %d bytes copied of 2 files, %d bytes listed)", torn.Bytes(), res.Manifest.Bytes()))

	require.NoError(t, os.Rename(filepath.Join(dir, "d", "x"), filepath.Join(dir, "e", "x")))
	err = heldStill(dir, pass, res.Manifest, 1)
	require.ErrorIs(t, err, ErrChanged, "a file moved after the pass: the counts agree, the directories' times do not")
	require.ErrorIs(t, heldStill(dir, sourcePass{md: md}, res.Manifest, 1), ErrChanged, "no listing: nothing to vouch")
}

// TestMaterializeStateDirRefused: a state directory that is a filesystem
// root, or inside a selected skill's directory (which every call would copy
// into the next bundle), is refused with ErrInvalidSource before anything
// is written.
func TestMaterializeStateDirRefused(t *testing.T) {
	src := t.TempDir()
	dir := skillDir(t, src, "a", "notes.txt:n")
	sel := []Source{{Key: "k", Name: "a", Dir: dir}}
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(dir, link))
	for _, tc := range []struct{ name, state, msg string }{
		{"root", "/", "is the filesystem root /"},
		{"root, spelled long", "//", "is the filesystem root /"},
		{"root through dot-dot", "/etc/..", "is the filesystem root /"},
		{"inside the skill", filepath.Join(dir, ".airlock-state"), `is inside skill "a"'s directory`},
		{"the skill itself", dir, `is inside skill "a"'s directory`},
		{"inside the skill, missing levels", filepath.Join(dir, "x", "y"), `is inside skill "a"'s directory`},
		{"inside the skill through a link", filepath.Join(link, "state"), `is inside skill "a"'s directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Materialize(context.Background(), tc.state, sel)
			require.ErrorIs(t, err, ErrInvalidSource)
			assert.Contains(t, err.Error(), tc.msg)
			for _, p := range []string{filepath.Join(dir, ".airlock-state"), filepath.Join(dir, "x")} {
				assert.NoDirExists(t, p, "nothing is written")
			}
		})
	}
	b, err := Materialize(context.Background(), filepath.Join(src, "state"), sel)
	require.NoError(t, err, "beside the skill is fine")
	assert.Equal(t, 2, b.Skills[0].Files)
}

// TestMaterializeSweepsOnlyItsOwn: a temporary directory a dead writer
// left (its lock free) is removed by the next call that copies, at once;
// a live writer's (locked) is kept, and so is every name of another shape
// or that is not a directory, however old.
func TestMaterializeSweepsOnlyItsOwn(t *testing.T) {
	state := t.TempDir()
	dead := filepath.Join(state, tmpPrefix+"ABCDEFGHIJKLMNOP")
	require.NoError(t, os.MkdirAll(filepath.Join(dead, "a"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dead, "a", "big"), make([]byte, 1<<20), 0o600))
	live := filepath.Join(state, tmpPrefix+"QRSTUVWXYZ234567")
	require.NoError(t, os.Mkdir(live, 0o700))
	f, err := os.Open(live)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	old := time.Now().Add(-48 * time.Hour)
	keep := []string{".tmp-my-notes", ".tmp-scratch.txt", ".tmp-abcdefghijklmnop", ".tmp-ABCDEFGHIJKLMNO", ".new-ABCDEFGHIJKLMNOPQ"}
	for _, n := range keep {
		p := filepath.Join(state, n)
		if strings.HasSuffix(n, ".txt") {
			require.NoError(t, os.WriteFile(p, []byte("mine"), 0o600))
		} else {
			require.NoError(t, os.Mkdir(p, 0o700))
		}
		require.NoError(t, os.Chtimes(p, old, old))
	}
	fileShaped := filepath.Join(state, tmpPrefix+"FILEFILEFILEFILE")
	require.NoError(t, os.WriteFile(fileShaped, []byte("not a directory"), 0o600))
	require.NoError(t, os.Chtimes(fileShaped, old, old))
	unlocked := filepath.Join(state, newPrefix+"NEWNEWNEWNEWNEW2")
	require.NoError(t, os.Mkdir(unlocked, 0o700))
	require.NoError(t, os.Chtimes(unlocked, old, old))

	_, err = Materialize(context.Background(), state, []Source{{Key: "k", Name: "a", Dir: skillDir(t, t.TempDir(), "a")}})
	require.NoError(t, err)
	assert.NoDirExists(t, dead, "a dead writer's leftover is removed at once")
	assert.NoDirExists(t, unlocked, "a directory that never got its lock, after a day")
	assert.DirExists(t, live, "a live writer's directory is kept")
	for _, n := range append(keep, filepath.Base(fileShaped)) {
		_, err := os.Lstat(filepath.Join(state, n))
		assert.NoError(t, err, "%s is not airlock's and is kept", n)
	}
}
