package enginetest_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/enginetest"
	"github.com/airlockdev/airlock/internal/treegen"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// benchShapes are the trees BenchmarkDockerStage stages.
var benchShapes = []struct {
	name  string
	shape treegen.Shape
}{
	// 20 dirs x 100 files of 0.5-40 KiB, eight of them 2 MiB: 2,000 files, ~55 MiB.
	{"2000files", treegen.Shape{Dirs: 20, Files: 100, MinBytes: 512, MaxBytes: 40 << 10, Large: 8, Large1: 2 << 20, Seed: 19}},
}

// stageMethod is one way of putting src into the fresh container
// directory dst.
type stageMethod struct {
	name string
	run  func(ctx context.Context, c *enginetest.Container, r sandbox.Runner, src, dst string) error
}

var stageMethods = []stageMethod{
	{"airlock", func(ctx context.Context, _ *enginetest.Container, r sandbox.Runner, src, dst string) error {
		_, err := stage.Stage(ctx, stage.NewBridge(r), dst, []stage.Asset{{Name: "tree", Source: src}})
		return err
	}},
	{"docker-cp", func(ctx context.Context, c *enginetest.Container, _ sandbox.Runner, src, dst string) error {
		return shell(ctx, `docker exec "$1" mkdir -p "$2" && docker cp "$3/." "$1:$2/tree"`, c.ID(), dst, src)
	}},
	{"tar-exec", func(ctx context.Context, c *enginetest.Container, _ sandbox.Runner, src, dst string) error {
		return shell(ctx, `tar -C "$3" -cf - . | docker exec -i "$1" sh -c 'mkdir -p "$1" && tar -C "$1" -xf -' sh "$2/tree"`, c.ID(), dst, src)
	}},
}

// shell runs a host sh script with args $1...
func shell(ctx context.Context, script string, args ...string) error {
	out, err := exec.CommandContext(ctx, "sh", append([]string{"-c", "set -e; " + script, "sh"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", script, err, out)
	}
	return nil
}

// BenchmarkDockerStage stages a generated tree into a fresh directory of
// a container three ways: airlock's stage.Stage over
// sandbox.Exec("docker", "exec", "-i", id), `docker cp`, and `tar -C src
// -cf - . | docker exec -i id tar -C dst -xf -`. Each iteration runs all
// three, in a rotating order, so that a shared machine's noise falls on
// each alike; the benchmark reports each one's median in milliseconds and
// airlock's median over tar-exec's (the target is at most 1.2). Run it
// with a fixed count of iterations:
//
//	go test -run '^$' -bench BenchmarkDockerStage -benchtime 7x ./internal/enginetest/
func BenchmarkDockerStage(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(s.name, func(b *testing.B) {
			c := enginetest.StartContainer(b, enginetest.Docker)
			r := sandbox.Exec(c.Argv()...)
			src := b.TempDir()
			tree, err := treegen.Write(src, s.shape)
			if err != nil {
				b.Fatal(err)
			}
			times := map[string][]time.Duration{}
			for i := 0; b.Loop(); i++ {
				for k := range stageMethods {
					m := stageMethods[(i+k)%len(stageMethods)]
					dst := fmt.Sprintf("%s/bench-%d-%s", enginetest.Workdir, i, m.name)
					start := time.Now()
					if err := m.run(b.Context(), c, r, src, dst); err != nil {
						b.Fatalf("%s: %v", m.name, err)
					}
					times[m.name] = append(times[m.name], time.Since(start))
					if n := strings.TrimSpace(c.Sh(b, `find "`+dst+`/tree" -type f | wc -l`)); n != fmt.Sprint(tree.Files) {
						b.Fatalf("%s put %s files in %s, want %d", m.name, n, dst, tree.Files)
					}
					c.ShAsRoot(b, `rm -rf "`+dst+`"`)
				}
			}
			med := map[string]float64{}
			for _, m := range stageMethods {
				med[m.name] = median(times[m.name])
				b.ReportMetric(med[m.name], m.name+"-ms")
			}
			b.ReportMetric(med["airlock"]/med["tar-exec"], "airlock/tar-exec")
			b.Logf("%d files, %.1f MiB, %d runs each: airlock %.0f ms, docker cp %.0f ms, tar | docker exec %.0f ms (medians); airlock/tar-exec %.2fx",
				tree.Files, float64(tree.Bytes)/(1<<20), len(times["airlock"]), med["airlock"], med["docker-cp"], med["tar-exec"], med["airlock"]/med["tar-exec"])
			for _, m := range stageMethods {
				b.Logf("%s: %s", m.name, spread(times[m.name]))
			}
		})
	}
}

// spread lists ds in milliseconds, in run order.
func spread(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprint(d.Milliseconds()))
	}
	return strings.Join(parts, " ")
}

// median returns the median of ds in milliseconds.
func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return float64(m) / float64(time.Millisecond)
}
