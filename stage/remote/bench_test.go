package remote_test

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/treegen"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
)

var firstRoots int

// BenchmarkStageRemote stages the standard tree (about 2,000 files, 25 MB)
// through remote.Host on remotetest with 2 ms added to every round trip:
// a first stage into an empty root, an unchanged re-stage (with an index,
// as a host keeps one), and a re-stage after one file changed.
func BenchmarkStageRemote(b *testing.B) {
	firstRoots += 1000
	src := b.TempDir()
	if _, err := treegen.Write(src, treegen.Standard); err != nil {
		b.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // older than the index's racy window
	srv := remotetest.NewServer(b, remotetest.WithLatency(2*time.Millisecond))
	h := dial(b, srv)
	assets := func() []stage.Asset { return []stage.Asset{{Name: "skills", Source: src}} }

	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			firstRoots++ // unique across -count runs: every stage is a first one
			root := path.Join(srv.Dir(), fmt.Sprintf("first-%d", firstRoots))
			if _, err := stage.Stage(b.Context(), h, root, assets()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		root := path.Join(srv.Dir(), "unchanged")
		ix := stage.NewIndex()
		if _, err := stage.Stage(b.Context(), h, root, assets(), stage.WithIndex(ix)); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			rt, err := stage.Stage(b.Context(), h, root, assets(), stage.WithIndex(ix))
			if err != nil || !rt.Assets[0].Reused {
				b.Fatalf("not reused: %v", err)
			}
		}
	})
	b.Run("one-changed", func(b *testing.B) {
		root := path.Join(srv.Dir(), "changed")
		if _, err := stage.Stage(b.Context(), h, root, assets()); err != nil {
			b.Fatal(err)
		}
		f := filepath.Join(src, "skill-00", "SKILL.md")
		orig, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		defer os.WriteFile(f, orig, 0o644)
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			if err := os.WriteFile(f, append(append([]byte(nil), orig...), fmt.Sprintf("\n%d\n", i)...), 0o644); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			rt, err := stage.Stage(b.Context(), h, root, assets())
			if err != nil || rt.Assets[0].Sent != 1 {
				b.Fatalf("sent %d: %v", rt.Assets[0].Sent, err)
			}
		}
	})
}
