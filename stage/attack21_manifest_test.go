package stage_test

// Black-box attack (from go doc only): a hostile sandbox rewrites the
// manifest stored beside a staged asset in a Dir target, then the host
// stages again. Each stage must either succeed with an exact copy of the
// source or fail with an error; never report success over a wrong copy,
// never panic, never run away with memory.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/treetest"
	"github.com/airlockdev/airlock/stage"
)

const a21Name = "sk"

type a21Entry struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Mode   int64  `json:"mode"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// a21Src writes the first version of the source.
func a21Src(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	treetest.Write(t, filepath.Join(src, "a.txt"), "hello", 0o644)
	treetest.Write(t, filepath.Join(src, "sub", "b.txt"), "bye", 0o600)
	treetest.Write(t, filepath.Join(src, "c.bin"), "\x00\x01\xff binary", 0o755)
	return src
}

// a21Change makes the second version: a.txt changed, d.txt added, the
// rest unchanged (so a delta publish carries them over).
func a21Change(t *testing.T, src string) {
	t.Helper()
	treetest.Write(t, filepath.Join(src, "a.txt"), "hello, version two", 0o644)
	treetest.Write(t, filepath.Join(src, "d.txt"), "new", 0o644)
}

// a21Same fails the test unless the staged copy equals the source.
func a21Same(t *testing.T, what, src, dst string) {
	t.Helper()
	if diffs := treetest.Diff(treetest.Snapshot(t, src), treetest.Snapshot(t, dst)); len(diffs) > 0 {
		t.Errorf("%s: Stage reported success over a wrong copy:\n  %s", what, strings.Join(diffs, "\n  "))
	}
}

type a21Env struct {
	src, sb, manifest, copyDir string
	dir                        *stage.Dir
}

func a21Setup(t *testing.T) *a21Env {
	t.Helper()
	e := &a21Env{src: a21Src(t), sb: t.TempDir()}
	d, err := stage.NewDir(e.sb)
	if err != nil {
		t.Fatal(err)
	}
	e.dir = d
	e.manifest = filepath.Join(e.sb, "rt", ".airlock-manifest-"+a21Name+".json")
	e.copyDir = filepath.Join(e.sb, "rt", a21Name)
	if _, err := e.stage(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.manifest); err != nil {
		t.Fatalf("manifest not where expected: %v", err)
	}
	return e
}

func (e *a21Env) stage(opts ...stage.Option) (rt *stage.Runtime, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("PANIC: %v", p)
		}
	}()
	return stage.Stage(context.Background(), e.dir, "/rt", []stage.Asset{{Name: a21Name, Source: e.src}}, opts...)
}

func (e *a21Env) entries(t *testing.T) []a21Entry {
	t.Helper()
	b, err := os.ReadFile(e.manifest)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Entries []a21Entry `json:"entries"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m.Entries
}

// a21Obj writes one entry with the given key order and path encoding.
func a21Obj(en a21Entry, pathKV string, order []string) string {
	kv := map[string]string{
		"path":   pathKV,
		"type":   fmt.Sprintf(`"type":%q`, en.Type),
		"mode":   fmt.Sprintf(`"mode":%d`, en.Mode),
		"size":   fmt.Sprintf(`"size":%d`, en.Size),
		"sha256": fmt.Sprintf(`"sha256":%q`, en.SHA256),
	}
	parts := make([]string, 0, len(order))
	for _, k := range order {
		parts = append(parts, kv[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

var a21Canon = []string{"path", "type", "mode", "size", "sha256"}

func a21Manifest(objs []string) string {
	return `{"entries":[` + strings.Join(objs, ",") + `]}`
}

func a21EscapeAll(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// a21Tampers returns rewrites of the stored manifest: from its bytes and
// entries to new bytes.
func a21Tampers() map[string]func(orig []byte, es []a21Entry) []byte {
	each := func(f func(i int, en a21Entry) string) func([]byte, []a21Entry) []byte {
		return func(_ []byte, es []a21Entry) []byte {
			var objs []string
			for i, en := range es {
				objs = append(objs, f(i, en))
			}
			return []byte(a21Manifest(objs))
		}
	}
	pathKV := func(en a21Entry) string { return fmt.Sprintf(`"path":%q`, en.Path) }
	m := map[string]func([]byte, []a21Entry) []byte{
		"reordered-keys": each(func(_ int, en a21Entry) string {
			return a21Obj(en, pathKV(en), []string{"sha256", "size", "mode", "type", "path"})
		}),
		"escaped-first-char": each(func(_ int, en a21Entry) string {
			return a21Obj(en, fmt.Sprintf(`"path":"\u%04x%s"`, en.Path[0], en.Path[1:]), a21Canon)
		}),
		"escaped-all": each(func(_ int, en a21Entry) string {
			return a21Obj(en, `"path":"`+a21EscapeAll(en.Path)+`"`, a21Canon)
		}),
		"escaped-keys": func(orig []byte, _ []a21Entry) []byte {
			s := strings.ReplaceAll(string(orig), `"path"`, `"\u0070ath"`)
			s = strings.ReplaceAll(s, `"sha256"`, `"sha\u0032\u00356"`)
			return []byte(strings.ReplaceAll(s, `"entries"`, `"\u0065ntries"`))
		},
		"escaped-slash": each(func(_ int, en a21Entry) string {
			return a21Obj(en, `"path":"`+strings.ReplaceAll(en.Path, "/", `\/`)+`"`, a21Canon)
		}),
		"path-hex": each(func(_ int, en a21Entry) string {
			return a21Obj(en, fmt.Sprintf(`"path_hex":%q`, hex.EncodeToString([]byte(en.Path))), a21Canon)
		}),
		"path-hex-upper": each(func(_ int, en a21Entry) string {
			return a21Obj(en, fmt.Sprintf(`"path_hex":%q`, strings.ToUpper(hex.EncodeToString([]byte(en.Path)))), a21Canon)
		}),
		"path-and-path-hex": each(func(_ int, en a21Entry) string {
			return a21Obj(en, fmt.Sprintf(`"path":"zz","path_hex":%q`, hex.EncodeToString([]byte(en.Path))), a21Canon)
		}),
		"duplicate-entries": func(_ []byte, es []a21Entry) []byte {
			var objs []string
			for _, en := range es {
				objs = append(objs, a21Obj(en, pathKV(en), a21Canon), a21Obj(en, pathKV(en), a21Canon))
			}
			return []byte(a21Manifest(objs))
		},
		"duplicate-path-key-first": each(func(_ int, en a21Entry) string {
			return a21Obj(en, fmt.Sprintf(`"path":%q,"path":"other"`, en.Path), a21Canon)
		}),
		"duplicate-path-key-last": each(func(_ int, en a21Entry) string {
			return a21Obj(en, fmt.Sprintf(`"path":"other","path":%q`, en.Path), a21Canon)
		}),
		"duplicate-sha-key": each(func(_ int, en a21Entry) string {
			return strings.TrimSuffix(a21Obj(en, pathKV(en), a21Canon), "}") + fmt.Sprintf(`,"sha256":%q}`, strings.Repeat("0", 64))
		}),
		"duplicate-entries-key": func(orig []byte, _ []a21Entry) []byte {
			return []byte(`{"entries":[],` + string(orig[1:]))
		},
		"duplicate-entries-key-last-empty": func(orig []byte, _ []a21Entry) []byte {
			return []byte(string(orig[:len(orig)-1]) + `,"entries":[]}`)
		},
		"huge-size": each(func(_ int, en a21Entry) string {
			return strings.Replace(a21Obj(en, pathKV(en), a21Canon), fmt.Sprintf(`"size":%d`, en.Size), `"size":99999999999999999999999999999`, 1)
		}),
		"size-float": each(func(_ int, en a21Entry) string {
			return strings.Replace(a21Obj(en, pathKV(en), a21Canon), fmt.Sprintf(`"size":%d`, en.Size), fmt.Sprintf(`"size":%d.0`, en.Size), 1)
		}),
		"size-exp": each(func(_ int, en a21Entry) string {
			return strings.Replace(a21Obj(en, pathKV(en), a21Canon), fmt.Sprintf(`"size":%d`, en.Size), fmt.Sprintf(`"size":%de0`, en.Size), 1)
		}),
		"size-leading-zero": each(func(_ int, en a21Entry) string {
			return strings.Replace(a21Obj(en, pathKV(en), a21Canon), fmt.Sprintf(`"size":%d`, en.Size), fmt.Sprintf(`"size":0%d`, en.Size), 1)
		}),
		"mode-leading-zero": each(func(_ int, en a21Entry) string {
			return strings.Replace(a21Obj(en, pathKV(en), a21Canon), fmt.Sprintf(`"mode":%d`, en.Mode), fmt.Sprintf(`"mode":0%d`, en.Mode), 1)
		}),
		"mode-negative": each(func(_ int, en a21Entry) string {
			return strings.Replace(a21Obj(en, pathKV(en), a21Canon), fmt.Sprintf(`"mode":%d`, en.Mode), fmt.Sprintf(`"mode":-%d`, en.Mode), 1)
		}),
		"mode-wraps": each(func(_ int, en a21Entry) string {
			return strings.Replace(a21Obj(en, pathKV(en), a21Canon), fmt.Sprintf(`"mode":%d`, en.Mode), fmt.Sprintf(`"mode":%d`, en.Mode+1<<32), 1)
		}),
		"size-wraps": each(func(_ int, en a21Entry) string {
			return strings.Replace(a21Obj(en, pathKV(en), a21Canon), fmt.Sprintf(`"size":%d`, en.Size), "\"size\":1844674407370955161"+fmt.Sprint(6+en.Size), 1)
		}),
		"sha-upper": each(func(_ int, en a21Entry) string {
			en.SHA256 = strings.ToUpper(en.SHA256)
			return a21Obj(en, pathKV(en), a21Canon)
		}),
		"whitespace": func(orig []byte, _ []a21Entry) []byte {
			var b bytes.Buffer
			if err := json.Indent(&b, orig, " ", "\t"); err != nil {
				panic(err)
			}
			return b.Bytes()
		},
		"unknown-keys": each(func(_ int, en a21Entry) string {
			return strings.TrimSuffix(a21Obj(en, pathKV(en), a21Canon), "}") + `,"x":{"y":[1,2,"}"]}}`
		}),
		"trailing-garbage": func(orig []byte, _ []a21Entry) []byte { return append(append([]byte{}, orig...), "garbage"...) },
		"trailing-brace":   func(orig []byte, _ []a21Entry) []byte { return append(append([]byte{}, orig...), '}') },
		"trailing-object":  func(orig []byte, _ []a21Entry) []byte { return append(append([]byte{}, orig...), ` {"entries":[]}`...) },
		"trailing-newline": func(orig []byte, _ []a21Entry) []byte { return append(append([]byte{}, orig...), '\n') },
		"trailing-nul":     func(orig []byte, _ []a21Entry) []byte { return append(append([]byte{}, orig...), 0) },
		"truncated":        func(orig []byte, _ []a21Entry) []byte { return orig[:len(orig)-2] },
		"empty":            func([]byte, []a21Entry) []byte { return nil },
		"null":             func([]byte, []a21Entry) []byte { return []byte("null") },
		"entries-null":     func([]byte, []a21Entry) []byte { return []byte(`{"entries":null}`) },
		"array":            func([]byte, []a21Entry) []byte { return []byte(`[]`) },
		"deep-brace-quote": func([]byte, []a21Entry) []byte { return bytes.Repeat([]byte(`{"`), 1<<20) },
		"deep-entries": func([]byte, []a21Entry) []byte {
			return []byte(`{"entries":` + strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20) + `}`)
		},
		"deep-unknown": func(orig []byte, _ []a21Entry) []byte {
			return []byte(`{"x":` + strings.Repeat(`{"a":`, 200000) + "1" + strings.Repeat("}", 200000) + "," + string(orig[1:]))
		},
		"bad-utf8-path": each(func(_ int, en a21Entry) string {
			return a21Obj(en, `"path":"`+en.Path+"\xff"+`"`, a21Canon)
		}),
		"lone-surrogate": each(func(_ int, en a21Entry) string {
			return a21Obj(en, `"path":"`+en.Path+`\ud800"`, a21Canon)
		}),
		"nul-in-path": each(func(_ int, en a21Entry) string {
			return a21Obj(en, `"path":"`+en.Path+`\u0000"`, a21Canon)
		}),
		"dot-paths": each(func(_ int, en a21Entry) string {
			return a21Obj(en, fmt.Sprintf(`"path":%q`, "./"+en.Path), a21Canon)
		}),
		"escape-paths": each(func(_ int, en a21Entry) string {
			return a21Obj(en, fmt.Sprintf(`"path":%q`, "../"+a21Name+"/"+en.Path), a21Canon)
		}),
		"types-swapped": each(func(_ int, en a21Entry) string {
			if en.Type == "dir" {
				en.Type = "file"
			} else {
				en.Type = "dir"
			}
			return a21Obj(en, pathKV(en), a21Canon)
		}),
		"reversed-order": func(_ []byte, es []a21Entry) []byte {
			var objs []string
			for i := len(es) - 1; i >= 0; i-- {
				objs = append(objs, a21Obj(es[i], pathKV(es[i]), a21Canon))
			}
			return []byte(a21Manifest(objs))
		},
		"bom": func(orig []byte, _ []a21Entry) []byte { return append([]byte("\ufeff"), orig...) },
	}
	return m
}

// a21Names lists the tampers in a stable order.
func a21Names() []string {
	var names []string
	for k := range a21Tampers() {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func a21Tamper(t *testing.T, e *a21Env, name string) {
	t.Helper()
	orig, err := os.ReadFile(e.manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.manifest, a21Tampers()[name](orig, e.entries(t)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// a21Outcome checks one stage: success means an exact copy; an error must
// not be a panic.
func a21Outcome(t *testing.T, what string, e *a21Env, rt *stage.Runtime, err error) {
	t.Helper()
	if err != nil {
		if strings.HasPrefix(err.Error(), "PANIC") || err.Error() == "" {
			t.Errorf("%s: %v", what, err)
		}
		t.Logf("%s: error: %v", what, err)
		return
	}
	a21Same(t, what, e.src, e.copyDir)
	if len(rt.Assets) != 1 {
		t.Fatalf("%s: %d assets", what, len(rt.Assets))
	}
	// the digest reported must be the one a clean sandbox gets
	clean, cerr := stage.NewDir(t.TempDir())
	if cerr != nil {
		t.Fatal(cerr)
	}
	ref, rerr := stage.Stage(context.Background(), clean, "/rt", []stage.Asset{{Name: a21Name, Source: e.src}})
	if rerr != nil {
		t.Fatal(rerr)
	}
	a, r := rt.Assets[0], ref.Assets[0]
	if a.Digest != r.Digest || a.Files != r.Files || a.Bytes != r.Bytes {
		t.Errorf("%s: reported digest %s files %d bytes %d; a clean stage gives %s %d %d", what, a.Digest, a.Files, a.Bytes, r.Digest, r.Files, r.Bytes)
	}
	t.Logf("%s: ok reused=%v sent=%d", what, a.Reused, a.Sent)
}

// TestAttack21ManifestTamper rewrites the stored manifest every way
// a21Names lists, in four scenarios: only the manifest (then a second stage
// with no change at all); the source changed too (a delta carries the
// unchanged files from the sandbox's previous copy); the sandbox also
// rewrote, same size, a file of its copy the source did not change (Dir
// checks the SHA-256 of every carried file, so it must not survive); and a
// damaged copy with a planted file and the source unchanged, staged
// WithVerify, which must repair it.
func TestAttack21ManifestTamper(t *testing.T) {
	for _, sc := range []struct {
		name   string
		damage func(t *testing.T, e *a21Env) // after the tamper, before the stage
		opts   []stage.Option
		again  bool // stage a second time, changing nothing
	}{
		{name: "same-source", again: true},
		{name: "changed-source", damage: func(t *testing.T, e *a21Env) { a21Change(t, e.src) }},
		{name: "copy-too", damage: func(t *testing.T, e *a21Env) {
			treetest.Write(t, filepath.Join(e.copyDir, "sub", "b.txt"), "BYE", 0o600)
			a21Change(t, e.src)
		}},
		{name: "verify", opts: []stage.Option{stage.WithVerify()}, damage: func(t *testing.T, e *a21Env) {
			treetest.Write(t, filepath.Join(e.copyDir, "sub", "b.txt"), "BYE", 0o600)
			treetest.Write(t, filepath.Join(e.copyDir, "extra.txt"), "planted", 0o644)
		}},
	} {
		for _, name := range a21Names() {
			t.Run(sc.name+"/"+name, func(t *testing.T) {
				e := a21Setup(t)
				a21Tamper(t, e, name)
				if sc.damage != nil {
					sc.damage(t, e)
				}
				rt, err := e.stage(sc.opts...)
				a21Outcome(t, sc.name, e, rt, err)
				if sc.again {
					rt, err = e.stage(sc.opts...)
					a21Outcome(t, sc.name+" again", e, rt, err)
				}
			})
		}
	}
}

// TestAttack21ManifestLies: the sandbox damages its copy and writes the
// manifest to describe the damage (hashes of what it now holds), with the
// source changed elsewhere. The delta must not carry the damaged file.
func TestAttack21ManifestLies(t *testing.T) {
	e := a21Setup(t)
	es := e.entries(t)
	treetest.Write(t, filepath.Join(e.copyDir, "sub", "b.txt"), "BYE", 0o600)
	var objs []string
	for _, en := range es {
		if en.Path == "sub/b.txt" {
			// keep the source's hash, so b.txt looks unchanged
			objs = append(objs, a21Obj(en, fmt.Sprintf(`"p\u0061th":%q`, en.Path), []string{"sha256", "path", "type", "mode", "size"}))
			continue
		}
		objs = append(objs, a21Obj(en, fmt.Sprintf(`"path":%q`, en.Path), a21Canon))
	}
	if err := os.WriteFile(e.manifest, []byte(a21Manifest(objs)), 0o644); err != nil {
		t.Fatal(err)
	}
	a21Change(t, e.src)
	rt, err := e.stage()
	a21Outcome(t, "lies", e, rt, err)
}

// TestAttack21ManifestUntouchedCopyDamaged: the manifest is left as
// written; the sandbox rewrites (same size) a file the source did not
// change, and plants one; the source changes elsewhere. The delta carries
// the unchanged files over and Dir checks their SHA-256: a successful
// stage must hold the source's bytes.
func TestAttack21ManifestUntouchedCopyDamaged(t *testing.T) {
	e := a21Setup(t)
	a21Change(t, e.src)
	rt, err := e.stage()
	a21Outcome(t, "baseline", e, rt, err)
	if err == nil && rt.Assets[0].Sent >= rt.Assets[0].Files {
		t.Logf("baseline: no delta (sent %d of %d)", rt.Assets[0].Sent, rt.Assets[0].Files)
	}
	treetest.Write(t, filepath.Join(e.copyDir, "sub", "b.txt"), "BYE", 0o600)
	treetest.Write(t, filepath.Join(e.copyDir, "c.bin"), "\x00\x01\xff BINARY", 0o755)
	if err := os.Chmod(filepath.Join(e.copyDir, "d.txt"), 0o777); err != nil {
		t.Fatal(err)
	}
	treetest.Write(t, filepath.Join(e.src, "a.txt"), "hello, version three", 0o644)
	rt, err = e.stage()
	a21Outcome(t, "damaged", e, rt, err)
}

// a21StageWithin stages e and fails the test when Stage does not return
// within limit (the goroutine is left behind blocked).
func a21StageWithin(t *testing.T, e *a21Env, limit time.Duration, opts ...stage.Option) (*stage.Runtime, error, bool) {
	t.Helper()
	type res struct {
		rt  *stage.Runtime
		err error
	}
	done := make(chan res, 1)
	go func() {
		rt, err := e.stage(opts...)
		done <- res{rt, err}
	}()
	select {
	case r := <-done:
		return r.rt, r.err, true
	case <-time.After(limit):
		t.Errorf("Stage did not return within %s", limit)
		return nil, nil, false
	}
}

// a21PlantFIFO, a21PlantSparse and a21PlantCharDev put a non-file at p: a
// FIFO, a 64 GB sparse file, a character device with /dev/zero's numbers
// (1, 5; mknod needs root).
func a21PlantFIFO(t *testing.T, p string) {
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
}

func a21PlantSparse(t *testing.T, p string) {
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 30); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func a21PlantCharDev(t *testing.T, p string) {
	if os.Geteuid() != 0 {
		t.Skip("planting a character device needs root (CAP_MKNOD); CI runs this as root")
	}
	if err := syscall.Mknod(p, syscall.S_IFCHR|0o600, 1<<8|5); err != nil {
		t.Fatalf("mknod: %v", err)
	}
}

// TestAttack21CarryOverPlanted: the manifest is left canonical; the
// sandbox replaces a file the source did not change with something else
// (a FIFO, a huge sparse file, a link to a same-content file elsewhere in
// the sandbox, a directory); the source changes elsewhere. Stage must
// return promptly with an exact copy or an error.
func TestAttack21CarryOverPlanted(t *testing.T) {
	plants := map[string]func(t *testing.T, e *a21Env, p string){
		"fifo":        func(t *testing.T, e *a21Env, p string) { a21PlantFIFO(t, p) },
		"sparse-huge": func(t *testing.T, e *a21Env, p string) { a21PlantSparse(t, p) },
		"symlink-same-content": func(t *testing.T, e *a21Env, p string) {
			treetest.Write(t, filepath.Join(e.sb, "elsewhere.txt"), "bye", 0o600)
			if err := os.Symlink("../../../elsewhere.txt", p); err != nil {
				t.Fatal(err)
			}
		},
		"symlink-outside": func(t *testing.T, e *a21Env, p string) {
			outside := filepath.Join(t.TempDir(), "host.txt")
			treetest.Write(t, outside, "bye", 0o600)
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
		},
		"hardlink-same-content": func(t *testing.T, e *a21Env, p string) {
			treetest.Write(t, filepath.Join(e.sb, "elsewhere.txt"), "bye", 0o600)
			if err := os.Link(filepath.Join(e.sb, "elsewhere.txt"), p); err != nil {
				t.Fatal(err)
			}
		},
		"chardev-zero": func(t *testing.T, e *a21Env, p string) { a21PlantCharDev(t, p) },

		"directory": func(t *testing.T, e *a21Env, p string) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		},
	}
	for _, name := range slices.Sorted(maps.Keys(plants)) {
		t.Run(name, func(t *testing.T) {
			e := a21Setup(t)
			p := filepath.Join(e.copyDir, "sub", "b.txt")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			plants[name](t, e, p)
			a21Change(t, e.src)
			rt, err, ok := a21StageWithin(t, e, 10*time.Second)
			if !ok {
				// unblock a reader stuck on the FIFO so the test can end
				if name == "fifo" {
					if f, ferr := os.OpenFile(p, os.O_WRONLY, 0); ferr == nil {
						f.Close()
					}
				}
				return
			}
			a21Outcome(t, name, e, rt, err)
			if err == nil {
				if info, lerr := os.Lstat(filepath.Join(e.sb, "elsewhere.txt")); lerr == nil {
					if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
						t.Errorf("%s: the sandbox's own file now shares its inode with the staged copy (%d links)", name, st.Nlink)
					}
				}
			}
		})
	}
}

// TestAttack21DeltaOddNames: file names whose manifest form needs escapes
// (quotes, backslashes, control bytes, HTML characters, U+2028, a literal
// "\u003c", invalid UTF-8 stored as path_hex). After one file changes, the
// documented delta publish sends only that file, and the copy is exact.
func TestAttack21DeltaOddNames(t *testing.T) {
	names := []string{
		`q"uote.txt`, `back\slash.txt`, "tab\there.txt", "nl\nhere.txt", "a<b&c>.txt",
		`lit\u003c.txt`, "<.txt", "sep\u2028.txt", "é.txt", "e\u0301.txt", "bad\xff\xfe.txt",
		"ctl\x01\x1f\x7f.txt", "%41.txt", "sp ace .txt", "-dash.txt", "zz/\xc3.txt",
	}
	src := t.TempDir()
	for i, n := range names {
		treetest.Write(t, filepath.Join(src, n), fmt.Sprintf("content %d of %q", i, n), 0o644)
	}
	treetest.Write(t, filepath.Join(src, "changing.txt"), "one", 0o644)
	sb := t.TempDir()
	d, err := stage.NewDir(sb)
	if err != nil {
		t.Fatal(err)
	}
	assets := []stage.Asset{{Name: a21Name, Source: src}}
	if _, err := stage.Stage(context.Background(), d, "/rt", assets); err != nil {
		t.Fatal(err)
	}
	treetest.Write(t, filepath.Join(src, "changing.txt"), "two", 0o644)
	rt, err := stage.Stage(context.Background(), d, "/rt", assets)
	if err != nil {
		t.Fatal(err)
	}
	a21Same(t, "odd names", src, filepath.Join(sb, "rt", a21Name))
	if got := rt.Assets[0].Sent; got != 1 {
		t.Errorf("sent %d files for one changed file (of %d)", got, rt.Assets[0].Files)
	}
	rt, err = stage.Stage(context.Background(), d, "/rt", assets)
	if err != nil {
		t.Fatal(err)
	}
	if !rt.Assets[0].Reused || rt.Assets[0].Sent != 0 {
		t.Errorf("unchanged restage: reused %v, sent %d", rt.Assets[0].Reused, rt.Assets[0].Sent)
	}
}

// TestAttack21ManifestNotAFile: the sandbox replaces the stored manifest
// with something that is not a small regular file. Stage must return
// promptly (10 s) with an exact copy or an error, without reading an
// endless or huge file into memory (fails above 1 GB allocated).
func TestAttack21ManifestNotAFile(t *testing.T) {
	plants := map[string]func(t *testing.T, e *a21Env){
		"fifo":         func(t *testing.T, e *a21Env) { a21PlantFIFO(t, e.manifest) },
		"sparse-64G":   func(t *testing.T, e *a21Env) { a21PlantSparse(t, e.manifest) },
		"chardev-zero": func(t *testing.T, e *a21Env) { a21PlantCharDev(t, e.manifest) },

		"symlink-dev-zero": func(t *testing.T, e *a21Env) {
			if err := os.Symlink("/dev/zero", e.manifest); err != nil {
				t.Fatal(err)
			}
		},
		"symlink-loop": func(t *testing.T, e *a21Env) {
			if err := os.Symlink(filepath.Base(e.manifest), e.manifest); err != nil {
				t.Fatal(err)
			}
		},
		"directory": func(t *testing.T, e *a21Env) {
			if err := os.Mkdir(e.manifest, 0o755); err != nil {
				t.Fatal(err)
			}
		},
		"unreadable": func(t *testing.T, e *a21Env) {
			treetest.Write(t, e.manifest, "{}", 0o000)
		},
	}
	for _, name := range slices.Sorted(maps.Keys(plants)) {
		t.Run(name, func(t *testing.T) {
			e := a21Setup(t)
			if err := os.Remove(e.manifest); err != nil {
				t.Fatal(err)
			}
			plants[name](t, e)
			a21Change(t, e.src)
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			rt, err, ok := a21StageWithin(t, e, 10*time.Second)
			if !ok {
				if name == "fifo" {
					if f, ferr := os.OpenFile(e.manifest, os.O_WRONLY, 0); ferr == nil {
						f.Close()
					}
				}
				return
			}
			runtime.ReadMemStats(&m1)
			if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 1<<30 {
				t.Errorf("%s: %d MB allocated", name, alloc>>20)
			}
			a21Outcome(t, name, e, rt, err)
		})
	}
}
