//go:build linux

package stage_test

// Attacks on the delta's stream walk (2026-12-04): a re-stage through a
// Bridge with an Index lists the files the sandbox carried from its previous
// copy without opening them, trusting their lstat stamp against the one the
// same Stage's compare took. Every attack changes a carried Source file
// between the compare and the stream (at a phase transition, at a progress
// call, or from a goroutine hammering the Source) and checks, after every
// Stage: a nil error leaves a copy whose every file holds a content that
// path really had, whose entries are only directories and regular files,
// and whose fresh digest is the Digest reported; an error wraps ErrChanged
// and leaves the previous copy whole.

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// atk26Files is how many same-size files the attacked Source holds
// (f00 is the one the delta changes; h1 and h2 are one inode).
const atk26Files = 16

// atk26Env is one Source staged into one Bridge over a local sandbox.
type atk26Env struct {
	t         *testing.T
	src, root string
	b         *stage.Bridge
	ix        *stage.Index // nil: stage without one
	mu        sync.Mutex
	hist      map[string]map[string]bool // every content each path ever had
	gen       int
	good      string // the Digest of the last Stage that returned nil
}

func newAtk26Env(t *testing.T) *atk26Env {
	dir := t.TempDir()
	e := &atk26Env{t: t, src: filepath.Join(dir, "src"), root: filepath.Join(dir, "sb", "rt"), ix: stage.NewIndex(), hist: map[string]map[string]bool{}}
	require.NoError(t, os.MkdirAll(filepath.Join(e.src, "d"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Dir(e.root), 0o755))
	e.b = stage.NewBridge(sandbox.Local(filepath.Dir(e.root)))
	for i := 0; i < atk26Files; i++ {
		e.write(fmt.Sprintf("f%02d", i))
	}
	e.write("d/x")
	e.write("h1")
	require.NoError(t, os.Link(filepath.Join(e.src, "h1"), filepath.Join(e.src, "h2")))
	e.note("h2", e.content("h1"))
	return e
}

// content reads rel from the Source.
func (e *atk26Env) content(rel string) string {
	b, err := os.ReadFile(filepath.Join(e.src, rel))
	require.NoError(e.t, err)
	return string(b)
}

func (e *atk26Env) note(rel, data string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hist[rel] == nil {
		e.hist[rel] = map[string]bool{}
	}
	e.hist[rel][data] = true
}

// next returns a fresh content of rel, always 16 bytes.
func (e *atk26Env) next(rel string) string {
	e.mu.Lock()
	e.gen++
	g := e.gen
	e.mu.Unlock()
	return fmt.Sprintf("%-6s%010d", rel, g)[:16]
}

// write gives rel a fresh content (a new file when missing).
func (e *atk26Env) write(rel string) {
	data := e.next(rel)
	e.note(rel, data)
	require.NoError(e.t, os.WriteFile(filepath.Join(e.src, rel), []byte(data), 0o644))
}

func (e *atk26Env) stage(opts ...stage.Option) (*stage.Runtime, error) {
	stage.SetLinkCosts(e.b, 1, 1e-12) // carrying is always cheaper: every unchanged file is carried
	if e.ix != nil {
		opts = append([]stage.Option{stage.WithIndex(e.ix), stage.WithRacyWindow(0)}, opts...)
	}
	return stage.Stage(e.t.Context(), e.b, e.root, []stage.Asset{{Name: "a", Source: e.src}}, opts...)
}

// atk26Digest is the Digest a fresh stage of dir's content reports.
func atk26Digest(t *testing.T, dir string) string {
	t.Helper()
	tgt, err := stage.NewDir(t.TempDir())
	require.NoError(t, err)
	rt, err := stage.Stage(t.Context(), tgt, "/r", []stage.Asset{{Name: "a", Source: dir}})
	require.NoError(t, err)
	return rt.Assets[0].Digest
}

// check asserts the invariant after a Stage that returned err.
func (e *atk26Env) check(what string, rt *stage.Runtime, err error) {
	t := e.t
	t.Helper()
	cp := filepath.Join(e.root, "a")
	require.Equal(t, []string{".airlock-manifest-a.json", "a"}, listDir(t, e.root), "%s: the stage root holds something besides the copy and its manifest", what)
	if err != nil {
		require.ErrorIs(t, err, stage.ErrChanged, "%s: a failed stage must say the source changed", what)
		require.Equal(t, e.good, atk26Digest(t, cp), "%s: a failed stage must leave the previous copy whole", what)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	require.NoError(t, filepath.WalkDir(cp, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == cp {
			return err
		}
		rel, _ := filepath.Rel(cp, p)
		switch {
		case d.IsDir():
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.True(t, e.hist[filepath.ToSlash(rel)][string(b)], "%s: the copy's %s holds %q, a content it never had on the host", what, rel, b)
		default:
			t.Fatalf("%s: the copy holds %s of type %v", what, rel, d.Type())
		}
		return nil
	}))
	require.Equal(t, atk26Digest(t, cp), rt.Assets[0].Digest, "%s: the reported Digest is not the copy's", what)
	e.good = rt.Assets[0].Digest
}

// quiet puts a file back at every name a mutation removed or replaced and
// stages the quiet Source, which must give its exact copy.
func (e *atk26Env) quiet(what string) {
	t := e.t
	for i := 0; i < atk26Files; i++ {
		rel := fmt.Sprintf("f%02d", i)
		if fi, err := os.Lstat(filepath.Join(e.src, rel)); err != nil || !fi.Mode().IsRegular() {
			require.NoError(t, os.RemoveAll(filepath.Join(e.src, rel)))
			e.write(rel)
		}
	}
	if fi, err := os.Lstat(filepath.Join(e.src, "d")); err != nil || !fi.IsDir() {
		require.NoError(t, os.RemoveAll(filepath.Join(e.src, "d")))
		require.NoError(t, os.Mkdir(filepath.Join(e.src, "d"), 0o755))
		e.write("d/x")
	}
	rt, err := e.stage()
	require.NoError(t, err, "%s: the quiet re-stage", what)
	atkSameCopy(t, e.src, filepath.Join(e.root, "a"))
	e.check(what+" (quiet)", rt, nil)
}

// atk26Mut is one change of a carried file p (q another one, same size).
type atk26Mut struct {
	name string
	do   func(e *atk26Env, p, q string)
}

var atk26Muts = []atk26Mut{
	{"rewrite same size, mtime set back", func(e *atk26Env, p, _ string) {
		data := e.next(p)
		e.note(p, data)
		e.note(p, "") // truncated first
		atkRewrite(e.t, filepath.Join(e.src, p), data)
	}},
	{"truncate and rewrite same size", func(e *atk26Env, p, _ string) {
		data := e.next(p)
		e.note(p, data)
		e.note(p, "")
		f, err := os.OpenFile(filepath.Join(e.src, p), os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(e.t, err)
		_, err = f.WriteString(data)
		require.NoError(e.t, err)
		require.NoError(e.t, f.Close())
	}},
	{"renamed over, mtime of the old", func(e *atk26Env, p, _ string) {
		fp := filepath.Join(e.src, p)
		fi, err := os.Stat(fp)
		require.NoError(e.t, err)
		data := e.next(p)
		e.note(p, data)
		tmp := filepath.Join(filepath.Dir(e.src), "tmp-"+filepath.Base(p))
		require.NoError(e.t, os.WriteFile(tmp, []byte(data), fi.Mode().Perm()))
		require.NoError(e.t, os.Chtimes(tmp, fi.ModTime(), fi.ModTime()))
		require.NoError(e.t, os.Rename(tmp, fp))
	}},
	{"renamed over, same content", func(e *atk26Env, p, _ string) {
		fp := filepath.Join(e.src, p)
		b, err := os.ReadFile(fp)
		require.NoError(e.t, err)
		fi, err := os.Stat(fp)
		require.NoError(e.t, err)
		tmp := filepath.Join(filepath.Dir(e.src), "tmp-"+filepath.Base(p))
		require.NoError(e.t, os.WriteFile(tmp, b, fi.Mode().Perm()))
		require.NoError(e.t, os.Rename(tmp, fp))
	}},
	{"exchanged with another", func(e *atk26Env, p, q string) {
		e.note(p, e.content(q))
		e.note(q, e.content(p))
		require.NoError(e.t, unix.Renameat2(unix.AT_FDCWD, filepath.Join(e.src, p), unix.AT_FDCWD, filepath.Join(e.src, q), unix.RENAME_EXCHANGE))
	}},
	{"removed", func(e *atk26Env, p, _ string) {
		require.NoError(e.t, os.Remove(filepath.Join(e.src, p)))
	}},
	{"replaced by a directory", func(e *atk26Env, p, _ string) {
		require.NoError(e.t, os.Remove(filepath.Join(e.src, p)))
		require.NoError(e.t, os.Mkdir(filepath.Join(e.src, p), 0o755))
		e.write(p + "/in")
	}},
	{"replaced by a link", func(e *atk26Env, p, q string) {
		require.NoError(e.t, os.Remove(filepath.Join(e.src, p)))
		require.NoError(e.t, os.Symlink(q, filepath.Join(e.src, p)))
	}},
	{"chmod, then rewritten same size", func(e *atk26Env, p, _ string) {
		fp := filepath.Join(e.src, p)
		fi, err := os.Stat(fp)
		require.NoError(e.t, err)
		require.NoError(e.t, os.Chmod(fp, fi.Mode().Perm()^0o111))
		data := e.next(p)
		e.note(p, data)
		e.note(p, "")
		atkRewrite(e.t, fp, data)
	}},
	{"parent directory chmodded", func(e *atk26Env, _, _ string) {
		d := filepath.Join(e.src, "d")
		fi, err := os.Stat(d)
		require.NoError(e.t, err)
		require.NoError(e.t, os.Chmod(d, fi.Mode().Perm()^0o050))
	}},
	{"parent directory replaced by a link to it", func(e *atk26Env, _, _ string) {
		d, old := filepath.Join(e.src, "d"), filepath.Join(filepath.Dir(e.src), "dold")
		require.NoError(e.t, os.RemoveAll(old))
		require.NoError(e.t, os.Rename(d, old))
		require.NoError(e.t, os.Symlink(old, d))
	}},
	{"parent directory removed", func(e *atk26Env, _, _ string) {
		require.NoError(e.t, os.RemoveAll(filepath.Join(e.src, "d")))
	}},
	{"parent directory replaced by a file", func(e *atk26Env, _, _ string) {
		require.NoError(e.t, os.RemoveAll(filepath.Join(e.src, "d")))
		e.write("d")
	}},
	{"new file beside it, delta rewritten", func(e *atk26Env, p, _ string) {
		e.write("new-" + p)
		e.write("f00")
	}},
	{"hard-linked twin rewritten", func(e *atk26Env, _, _ string) {
		data := e.next("h1")
		for _, c := range []string{data, ""} {
			e.note("h1", c)
			e.note("h2", c)
		}
		atkRewrite(e.t, filepath.Join(e.src, "h2"), data)
	}},
}

// TestAtk26CarriedChangedBeforeStream changes one carried file at a random
// point of a delta re-stage (a phase transition of the Bridge's publish or
// a progress call), for every kind of change, many times.
func TestAtk26CarriedChangedBeforeStream(t *testing.T) {
	e := newAtk26Env(t)
	rt, err := e.stage()
	require.NoError(t, err)
	e.check("first", rt, nil)
	rng := rand.New(rand.NewSource(26))
	phases := []string{stage.PhaseName(1), stage.PhaseName(2), stage.PhaseName(3)}
	var ok, failed, carried int
	deadline := time.Now().Add(6 * time.Second) // at least one pass over every change
	for run := 0; run == 0 || time.Now().Before(deadline); run++ {
		for _, m := range atk26Muts {
			what := fmt.Sprintf("run %d, %s", run, m.name)
			p := fmt.Sprintf("f%02d", 1+rng.Intn(atk26Files-1))
			q := fmt.Sprintf("f%02d", 1+rng.Intn(atk26Files-1))
			if q == p {
				q = "f00"
			}
			e.write("f00") // the delta
			var once sync.Once
			fire := func() { once.Do(func() { m.do(e, p, q) }) }
			var opts []stage.Option
			if at := rng.Intn(4); at < len(phases) {
				what += " at " + phases[at]
				stage.SetPhaseHook(e.b, func(_, to string, _ error) {
					if to == phases[at] {
						fire()
					}
				})
			} else {
				k, n := rng.Intn(3), 0
				what += fmt.Sprintf(" at progress %d", k)
				stage.SetPhaseHook(e.b, func(string, string, error) {})
				opts = append(opts, stage.WithProgress(func(sandbox.Progress) {
					if n++; n > k {
						fire()
					}
				}))
			}
			rt, err := e.stage(opts...)
			fire() // a stage that never reached the point still changes the Source
			stage.SetPhaseHook(e.b, func(string, string, error) {})
			e.check(what, rt, err)
			if err != nil {
				failed++
			} else {
				ok++
				if rt.Assets[0].Sent < rt.Assets[0].Files {
					carried++
				}
			}
			e.quiet(what)
		}
	}
	t.Logf("%d stages returned nil (%d of them carried files), %d failed with ErrChanged", ok, carried, failed)
	require.NotZero(t, carried, "no attacked stage carried anything: the attack missed the delta")
}

// TestAtk26Hammered re-stages a Source whose carried files a goroutine
// keeps changing (same-size rewrites with the mtime set back, renames over,
// exchanges, the parent directory's mode), checking every Stage.
func TestAtk26Hammered(t *testing.T) {
	e := newAtk26Env(t)
	rt, err := e.stage()
	require.NoError(t, err)
	e.check("first", rt, nil)
	var muts []atk26Mut
	for _, m := range atk26Muts {
		switch m.name {
		case "rewrite same size, mtime set back", "truncate and rewrite same size", "renamed over, mtime of the old",
			"renamed over, same content", "exchanged with another", "parent directory chmodded", "hard-linked twin rewritten":
			muts = append(muts, m)
		}
	}
	require.Len(t, muts, 7)
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop.Store(true)
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewSource(2626))
		for !stop.Load() {
			p := fmt.Sprintf("f%02d", 1+rng.Intn(atk26Files-1))
			q := fmt.Sprintf("f%02d", 1+rng.Intn(atk26Files-1))
			if p != q {
				muts[rng.Intn(len(muts))].do(e, p, q)
			}
			time.Sleep(time.Duration(rng.Intn(300)) * time.Microsecond)
		}
	}()
	var ok, failed int
	deadline := time.Now().Add(4 * time.Second)
	for run := 0; time.Now().Before(deadline); run++ {
		e.write("f00")
		rt, err := e.stage()
		e.check(fmt.Sprintf("hammered run %d", run), rt, err)
		if err != nil {
			failed++
		} else {
			ok++
		}
	}
	stop.Store(true)
	wg.Wait()
	e.quiet("after the hammer")
	t.Logf("%d hammered stages returned nil, %d failed with ErrChanged", ok, failed)
}

// TestAtk26DirCarriedChmod chmods a file Dir's delta carries once Dir's
// temporary directory exists (after the compare): the copy gets the mode
// its manifest records (the Bridge does not: attack26_fail_test.go).
func TestAtk26DirCarriedChmod(t *testing.T) {
	e := newAtk26Env(t)
	sb := t.TempDir()
	d, err := stage.NewDir(sb)
	require.NoError(t, err)
	assets := []stage.Asset{{Name: "a", Source: e.src}}
	_, err = stage.Stage(t.Context(), d, "/rt", assets)
	require.NoError(t, err)
	e.write("f00")
	stage.SetMade(d, func() { require.NoError(t, os.Chmod(filepath.Join(e.src, "f05"), 0o755)) })
	rt, err := stage.Stage(t.Context(), d, "/rt", assets)
	require.NoError(t, err)
	require.Equal(t, 1, rt.Assets[0].Sent, "the other files are carried")
	fi, err := os.Stat(filepath.Join(sb, "rt", "a", "f05"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o755), fi.Mode().Perm())
	require.Equal(t, atk26Digest(t, filepath.Join(sb, "rt", "a")), rt.Assets[0].Digest)
}
