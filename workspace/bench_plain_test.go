package workspace_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// BenchmarkRestorePlain measures a plain directory's Restore over
// sandbox.Local: 2,000 files of 4 KiB in 40 directories, of which the
// agent changed every one ("all") or one ("one") before each Restore (a
// new round each time, its Prepare not timed).
//
//	go test -run '^$' -bench BenchmarkRestorePlain -benchtime 20x ./workspace/
func BenchmarkRestorePlain(b *testing.B) {
	for _, changed := range []string{"all", "one"} {
		b.Run(changed, func(b *testing.B) {
			base := b.TempDir()
			local, remote := filepath.Join(base, "local"), filepath.Join(base, "sandbox", "work")
			var files []string
			for d := range 40 {
				for f := range 50 {
					p := fmt.Sprintf("d%02d/f%02d.txt", d, f)
					files = append(files, p)
					writeBench(b, filepath.Join(local, p), strings.Repeat("x", 4<<10))
				}
			}
			if err := os.MkdirAll(filepath.Dir(remote), 0o755); err != nil {
				b.Fatal(err)
			}
			spec := workspace.Spec{Local: local, Remote: remote, Runner: sandbox.Local(filepath.Dir(remote))}
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				// A round per Restore: its baseline is what the host had.
				r, err := workspace.Prepare(b.Context(), spec, workspace.WithStateDir(filepath.Join(base, "state")))
				if err != nil {
					b.Fatal(err)
				}
				edit := files
				if changed == "one" {
					edit = files[i%len(files):][:1]
				}
				for _, p := range edit {
					writeBench(b, filepath.Join(remote, p), fmt.Sprintf("round %d\n", i))
				}
				b.StartTimer()
				res, err := r.Restore(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Updated) != len(edit) {
					b.Fatalf("round %d: %d files updated, want %d", i, len(res.Updated), len(edit))
				}
			}
		})
	}
}

func writeBench(b *testing.B, p, data string) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		b.Fatal(err)
	}
}
