package skills

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMaterializeConcurrentCopiesKeepSourceOrder: skills are copied a few at
// a time, but the outcome is that of copying them in order: of several
// failing skills the first one's error is returned, and the bundle is the
// same as ever.
func TestMaterializeConcurrentCopiesKeepSourceOrder(t *testing.T) {
	src := t.TempDir()
	var sel []Source
	for i := range 8 {
		name := fmt.Sprintf("s%d", i)
		var extra []string
		for k := range 30 {
			extra = append(extra, fmt.Sprintf("f%02d:%s", k, strings.Repeat(name, 50*k)))
		}
		if i == 3 || i == 6 {
			extra = append(extra, "big:"+strings.Repeat("x", 5000)) // over the limit below
		}
		sel = append(sel, Source{Key: "k/" + name, Name: name, Dir: skillDir(t, src, name, extra...)})
	}
	for range 20 {
		_, err := Materialize(context.Background(), t.TempDir(), sel, WithLimits(Limits{MaxFileBytes: 4000}))
		var le *LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, "s3", le.Skill, "the first failing source's error")
		assert.Equal(t, "big", le.Path)
	}
	ok := append(append([]Source{}, sel[:3]...), sel[7])
	first, err := Materialize(context.Background(), t.TempDir(), ok)
	require.NoError(t, err)
	for range 5 {
		state := t.TempDir()
		b, err := Materialize(context.Background(), state, ok)
		require.NoError(t, err)
		assert.Equal(t, first.Identity, b.Identity)
		assert.Equal(t, first.Skills, b.Skills)
		entries, err := os.ReadDir(state)
		require.NoError(t, err)
		for _, e := range entries {
			assert.False(t, strings.HasPrefix(e.Name(), ".tmp-"), "no temporary directory is left: %s", filepath.Join(state, e.Name()))
		}
	}
}
