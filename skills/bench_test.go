package skills

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/treegen"
)

// benchSources writes the standard 20 x 100 tree once per benchmark.
func benchSources(b *testing.B) (string, []Source) {
	b.Helper()
	src := b.TempDir()
	gen, err := treegen.Write(src, treegen.Standard)
	if err != nil {
		b.Fatal(err)
	}
	var sel []Source
	for _, d := range gen.Dirs {
		sel = append(sel, Source{Key: "bench/" + filepath.Base(d), Name: filepath.Base(d), Dir: d})
	}
	return src, sel
}

// BenchmarkMaterialize copies the whole tree into a fresh state directory
// each iteration (a cold bundle).
func BenchmarkMaterialize(b *testing.B) {
	_, sel := benchSources(b)
	out := b.TempDir()
	time.Sleep(racyWindow + 100*time.Millisecond) // an aged tree: the index pass runs, as it does for a real selection
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := Materialize(context.Background(), filepath.Join(out, fmt.Sprint(i)), sel); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMaterializeReuse materializes an unchanged selection again.
func BenchmarkMaterializeReuse(b *testing.B) {
	_, sel := benchSources(b)
	state := b.TempDir()
	time.Sleep(racyWindow + 100*time.Millisecond) // let the index trust the tree, as it would a real one
	if _, err := Materialize(context.Background(), state, sel); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Materialize(context.Background(), state, sel); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMaterializeReuseAllDropped materializes again, in strict mode,
// an unchanged selection of which every skill is dropped (each Source.Name
// differs from its SKILL.md's name): an index hit like any other, where it
// once copied and hashed the whole tree on every call.
func BenchmarkMaterializeReuseAllDropped(b *testing.B) {
	_, sel := benchSources(b)
	for i := range sel {
		sel[i].Name = "renamed-" + sel[i].Name
	}
	state := b.TempDir()
	time.Sleep(racyWindow + 100*time.Millisecond)
	first, err := Materialize(context.Background(), state, sel, WithStrictSpec())
	if err != nil {
		b.Fatal(err)
	}
	if len(first.Skills) != 0 || len(first.Dropped) != len(sel) {
		b.Fatalf("%d skills kept, %d dropped; want all %d dropped", len(first.Skills), len(first.Dropped), len(sel))
	}
	for b.Loop() {
		if _, err := Materialize(context.Background(), state, sel, WithStrictSpec()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCpA is the baseline: cp -a of the same tree.
func BenchmarkCpA(b *testing.B) {
	if _, err := exec.LookPath("cp"); err != nil {
		b.Skip("cp not found; the baseline needs coreutils cp")
	}
	src, _ := benchSources(b)
	out := b.TempDir()
	for i := 0; b.Loop(); i++ {
		if msg, err := exec.Command("cp", "-a", src, filepath.Join(out, fmt.Sprint(i))).CombinedOutput(); err != nil {
			b.Fatalf("cp -a: %v: %s", err, msg)
		}
	}
}
