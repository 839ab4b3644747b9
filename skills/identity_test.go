package skills

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIdentityExcludesDrops pins what Identity's documentation says it does
// not cover: a dropped skill, in any state, takes no part, so a selection of
// dropped skills only has the identity of an empty selection, and adding a
// dropped skill beside good ones leaves theirs.
func TestIdentityExcludesDrops(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	good := skillDir(t, src, "good", "x.txt:one")
	broken := filepath.Join(src, "broken")
	writeMD(t, broken, "") // an empty SKILL.md: dropped
	missing := filepath.Join(src, "missing")
	dropped := []Source{{Key: "k/broken", Name: "broken", Dir: broken}, {Key: "k/missing", Name: "missing", Dir: missing}}

	none, err := Materialize(ctx, t.TempDir(), nil)
	require.NoError(t, err)
	require.Empty(t, none.Skills)
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, none.Identity.Digest)
	alone, err := Materialize(ctx, t.TempDir(), []Source{{Key: "k/good", Name: "good", Dir: good}})
	require.NoError(t, err)
	require.NotEqual(t, none.Identity, alone.Identity, "a surviving skill must change the identity")

	materialize := func(t *testing.T, sources []Source) *Bundle {
		t.Helper()
		b, err := Materialize(ctx, t.TempDir(), sources)
		require.NoError(t, err)
		return b
	}
	t.Run("only dropped skills: the identity of no skill", func(t *testing.T) {
		b := materialize(t, dropped)
		require.Len(t, b.Dropped, 2)
		assert.Empty(t, b.Skills)
		assert.Equal(t, none.Identity, b.Identity)
	})
	t.Run("a changed skill that stays dropped: still the identity of no skill", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(broken, "SKILL.md"), []byte("---\nname: [unclosed\n---\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(broken, "extra.txt"), []byte("more"), 0o644))
		b := materialize(t, []Source{{Key: "k/renamed", Name: "broken", Dir: broken}})
		require.Len(t, b.Dropped, 1)
		assert.Equal(t, none.Identity, b.Identity)
	})
	t.Run("dropped skills beside a good one: the good one's identity", func(t *testing.T) {
		b := materialize(t, append([]Source{{Key: "k/good", Name: "good", Dir: good}}, dropped...))
		require.Len(t, b.Dropped, 2)
		require.Len(t, b.Skills, 1)
		assert.Equal(t, alone.Identity, b.Identity)
	})
	t.Run("a link the copy skips takes no part", func(t *testing.T) {
		link := filepath.Join(good, "link.txt")
		require.NoError(t, os.Symlink("x.txt", link))
		t.Cleanup(func() { require.NoError(t, os.Remove(link)) })
		b := materialize(t, []Source{{Key: "k/good", Name: "good", Dir: good}})
		require.Len(t, b.Skills, 1)
		assert.Equal(t, []string{"link.txt"}, b.Skills[0].Skipped)
		assert.Equal(t, alone.Identity, b.Identity)
	})
	t.Run("the drop becoming usable changes it", func(t *testing.T) {
		writeMD(t, missing, "---\nname: missing\ndescription: Now here.\n---\n")
		t.Cleanup(func() { require.NoError(t, os.RemoveAll(missing)) })
		b := materialize(t, dropped[1:])
		require.Len(t, b.Skills, 1)
		assert.NotEqual(t, none.Identity, b.Identity)
	})
}
