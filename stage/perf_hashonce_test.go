package stage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/tree"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// sourceBytes sums the sizes of the regular files under dir.
func sourceBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return err
	}))
	return n
}

// TestRestageHashesEachSourceByteOnce: on every in-package target, a first
// stage, an unchanged re-stage and a re-stage with changed and new files
// each pass every byte of the source through SHA-256 once: the comparing
// walk reads only the files the stored manifest could still describe, and
// the publish takes the carried files' hashes from it instead of reading
// them again. A file edited in place with the same size is the exception
// (the comparing walk must hash it to find it changed; the publish hashes
// what it sends).
func TestRestageHashesEachSourceByteOnce(t *testing.T) {
	var hashed atomic.Int64
	defer tree.CountHashed(&hashed)()
	for name, newTarget := range unstageTargets(t) {
		t.Run(name, func(t *testing.T) {
			target, host := newTarget(t)
			root := rootOf(target, host)
			src := t.TempDir()
			build(t, src, "a="+strings.Repeat("a", 1000), "d/b="+strings.Repeat("b", 3000), "d/c="+strings.Repeat("c", 5000), "e="+strings.Repeat("e", 7000))
			assets := []stage.Asset{{Name: "x", Source: src}}

			hashed.Store(0)
			rt, err := stage.Stage(t.Context(), target, root, assets)
			require.NoError(t, err)
			assert.Equal(t, sourceBytes(t, src), hashed.Load(), "first stage")

			hashed.Store(0)
			rt2, err := stage.Stage(t.Context(), target, root, assets)
			require.NoError(t, err)
			assert.True(t, rt2.Assets[0].Reused)
			assert.Equal(t, rt.Assets[0].Digest, rt2.Assets[0].Digest)
			assert.Equal(t, sourceBytes(t, src), hashed.Load(), "unchanged re-stage")

			build(t, src, "a="+strings.Repeat("A", 1500), "n="+strings.Repeat("n", 2500))
			hashed.Store(0)
			rt, err = stage.Stage(t.Context(), target, root, assets)
			require.NoError(t, err)
			assert.Equal(t, 2, rt.Assets[0].Sent, "the changed file and the new one")
			assert.Equal(t, sourceBytes(t, src), hashed.Load(), "re-stage with a grown file and a new one")
			assert.Equal(t, strings.Repeat("A", 1500), readFile(t, filepath.Join(host, "x", "a")))

			// The digest is the one a fresh stage of the same source gives.
			fresh, err := stage.NewDir(t.TempDir())
			require.NoError(t, err)
			rf, err := stage.Stage(t.Context(), fresh, "/rt", assets)
			require.NoError(t, err)
			assert.Equal(t, rf.Assets[0].Digest, rt.Assets[0].Digest)

			build(t, src, "d/c="+strings.Repeat("C", 5000))
			hashed.Store(0)
			rt, err = stage.Stage(t.Context(), target, root, assets, stage.WithVerify())
			require.NoError(t, err)
			assert.Equal(t, 1, rt.Assets[0].Sent)
			assert.Equal(t, sourceBytes(t, src)+5000, hashed.Load(), "a same-size edit is hashed by both walks")
			assert.Equal(t, strings.Repeat("C", 5000), readFile(t, filepath.Join(host, "x", "d", "c")))
		})
	}
}

// changeBeforePublish is a Target that rewrites a Source file (same size,
// same modification time) after Stage compared the Source with the stored
// manifest and before the publish walks it.
type changeBeforePublish struct {
	stage.Target
	file, content string
}

func (c changeBeforePublish) Publish(ctx context.Context, root, name string, src *stage.Tree) error {
	fi, err := os.Stat(c.file)
	if err != nil {
		return err
	}
	time.Sleep(10 * time.Millisecond) // a change time the comparing walk cannot have seen
	if err := os.WriteFile(c.file, []byte(c.content), 0o644); err != nil {
		return err
	}
	if err := os.Chtimes(c.file, fi.ModTime(), fi.ModTime()); err != nil {
		return err
	}
	return c.Target.Publish(ctx, root, name, src)
}

// TestRestageCarriedFileChangedBeforePublish: a file that the comparing
// walk found unchanged, and that changes before the publish walks it, is
// not taken on the comparing walk's word: its stamp no longer matches, the
// publish reads it again and the stage fails with ErrChanged, leaving the
// previous copy in place.
func TestRestageCarriedFileChangedBeforePublish(t *testing.T) {
	for name, newTarget := range unstageTargets(t) {
		t.Run(name, func(t *testing.T) {
			target, host := newTarget(t)
			root := rootOf(target, host)
			src := t.TempDir()
			build(t, src, "a=alpha", "b=bravo")
			assets := []stage.Asset{{Name: "x", Source: src}}
			_, err := stage.Stage(t.Context(), target, root, assets)
			require.NoError(t, err)

			build(t, src, "a=ALPHA!") // changed: the asset is published again, b carried
			c := changeBeforePublish{Target: target, file: filepath.Join(src, "b"), content: "BRAVO"}
			_, err = stage.Stage(t.Context(), c, root, assets)
			require.ErrorIs(t, err, stage.ErrChanged)
			assert.Equal(t, "alpha", readFile(t, filepath.Join(host, "x", "a")), "the previous copy stays")
			assert.Equal(t, "bravo", readFile(t, filepath.Join(host, "x", "b")))

			rt, err := stage.Stage(t.Context(), target, root, assets)
			require.NoError(t, err)
			assert.Equal(t, 2, rt.Assets[0].Sent)
			assert.Equal(t, "BRAVO", readFile(t, filepath.Join(host, "x", "b")))
		})
	}
}

// TestDeltaStreamOpensOnlyWhatItSends: a Bridge's delta, with an Index
// whose stamps vouch for the unchanged files, opens on the host only the
// file that changed — once to find it changed, once to send it — however
// many files it carries; the carried ones are listed with the compare's
// hashes, unopened. The copy is the source's, its digest a fresh stage's.
func TestDeltaStreamOpensOnlyWhatItSends(t *testing.T) {
	var opened atomic.Int64
	defer tree.CountOpened(&opened)()
	dir := t.TempDir()
	target, root := stage.NewBridge(sandbox.Local(dir)), filepath.Join(dir, "rt")
	src := t.TempDir()
	var spec []string
	for i := range 40 {
		spec = append(spec, fmt.Sprintf("d%d/f%02d=%s", i%4, i, strings.Repeat("x", 100+i)))
	}
	build(t, src, spec...)
	assets := []stage.Asset{{Name: "x", Source: src}}
	opts := []stage.Option{stage.WithIndex(stage.NewIndex()), stage.WithRacyWindow(0)}
	_, err := stage.Stage(t.Context(), target, root, assets, opts...)
	require.NoError(t, err)
	assert.Equal(t, int64(40), opened.Load(), "the first stage opens every file")

	build(t, src, "d1/f05="+strings.Repeat("y", 105))
	opened.Store(0)
	rt, err := stage.Stage(t.Context(), target, root, assets, opts...)
	require.NoError(t, err)
	assert.Equal(t, 1, rt.Assets[0].Sent)
	assert.Equal(t, int64(2), opened.Load(), "the delta opens the changed file to compare it and to send it, and nothing else")
	assert.Equal(t, strings.Repeat("y", 105), readFile(t, filepath.Join(root, "x", "d1", "f05")))

	fresh, err := stage.NewDir(t.TempDir())
	require.NoError(t, err)
	rf, err := stage.Stage(t.Context(), fresh, "/rt", assets)
	require.NoError(t, err)
	assert.Equal(t, rf.Assets[0].Digest, rt.Assets[0].Digest)
}

// walkThenFail is a Target whose Publish reads the whole Source through
// Walk and then fails, as a sandbox that breaks after the transfer would.
type walkThenFail struct{ stage.Target }

var errAfterWalk = errors.New("the sandbox failed after the transfer")

func (w walkThenFail) Publish(ctx context.Context, root, name string, src *stage.Tree) error {
	if _, err := src.Walk(ctx, func(_ stage.Entry, r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	}); err != nil {
		return err
	}
	return errAfterWalk
}

// TestStampsKeptWhenPublishFails: the stamps an Index keeps say what the
// host's files hold, so a publish that fails after its walk read the
// Source still leaves them (they go to the Index while the Target
// publishes): the next stage's compare takes a file edited in place (same
// size) from them, and only its publish reads it again.
func TestStampsKeptWhenPublishFails(t *testing.T) {
	var hashed atomic.Int64
	defer tree.CountHashed(&hashed)()
	sb := t.TempDir()
	d, err := stage.NewDir(sb)
	require.NoError(t, err)
	src := t.TempDir()
	build(t, src, "a="+strings.Repeat("a", 1000), "d/b="+strings.Repeat("b", 3000), "e="+strings.Repeat("e", 5000))
	assets := []stage.Asset{{Name: "x", Source: src}}
	opts := []stage.Option{stage.WithIndex(stage.NewIndex()), stage.WithRacyWindow(0)}
	_, err = stage.Stage(t.Context(), d, "/rt", assets, opts...)
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(filepath.Join(src, "e"), []byte(strings.Repeat("E", 5000)), 0o644))
	time.Sleep(10 * time.Millisecond) // the edit's change time is then before the next stage began
	_, err = stage.Stage(t.Context(), walkThenFail{d}, "/rt", assets, opts...)
	require.ErrorIs(t, err, errAfterWalk)

	hashed.Store(0)
	rt, err := stage.Stage(t.Context(), d, "/rt", assets, opts...)
	require.NoError(t, err)
	assert.Equal(t, 1, rt.Assets[0].Sent)
	assert.Equal(t, int64(5000), hashed.Load(), "e is read once, by the publish: the compare took its hash from the failed stage's stamps")
	sameTree(t, src, filepath.Join(sb, "rt", "x"))
}
