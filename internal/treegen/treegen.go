package treegen

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Shape says what to generate.
type Shape struct {
	Dirs     int // skill directories
	Files    int // files in each, SKILL.md included
	MinBytes int // smallest ordinary file
	MaxBytes int // largest ordinary file
	Large    int // how many files (spread over the dirs) are LargeBytes long
	Large1   int // size of a large file
	Seed     uint64
}

// Standard is the benchmark tree: 20 skills x 100 files of 0.5–16 KiB, four
// of them 2 MiB.
var Standard = Shape{Dirs: 20, Files: 100, MinBytes: 512, MaxBytes: 16 << 10, Large: 4, Large1: 2 << 20, Seed: 1}

// Pages is the large benchmark tree, the size of a real documentation
// repository (tldr-pages: 38,490 files): 38 directories x 1,000 files of
// 128 B–4 KiB, about 80 MB.
var Pages = Shape{Dirs: 38, Files: 1000, MinBytes: 128, MaxBytes: 4 << 10, Seed: 2}

// Shapes are the named shapes, for the benchmark commands' flags.
var Shapes = map[string]Shape{"standard": Standard, "pages": Pages}

// Tree is what Write wrote.
type Tree struct {
	Dirs  []string // the skill directories
	Files int      // regular files, SKILL.md included
	Bytes int64    // their total size
}

// Write creates the tree under dir (which must exist). Each skill holds a
// valid SKILL.md, a scripts/ directory with executables, and nested
// reference files.
func Write(dir string, s Shape) (Tree, error) {
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	buf := make([]byte, max(s.MaxBytes, s.Large1))
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	var t Tree
	large := 0
	for d := range s.Dirs {
		name := fmt.Sprintf("skill-%02d", d)
		root := filepath.Join(dir, name)
		for _, sub := range []string{"scripts", "reference/deep"} {
			if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
				return Tree{}, err
			}
		}
		md := fmt.Sprintf("---\nname: %s\ndescription: Benchmark skill %d.\n---\n# %s\n", name, d, name)
		if err := os.WriteFile(filepath.Join(root, "SKILL.md"), []byte(md), 0o644); err != nil {
			return Tree{}, err
		}
		t.Files++
		t.Bytes += int64(len(md))
		for f := 1; f < s.Files; f++ {
			size := s.MinBytes + rng.IntN(s.MaxBytes-s.MinBytes+1)
			if large < s.Large && f == s.Files/2 && d%max(1, s.Dirs/s.Large) == 0 {
				size = s.Large1
				large++
			}
			var rel string
			mode := os.FileMode(0o644)
			switch f % 10 {
			case 0:
				rel, mode = fmt.Sprintf("scripts/run-%03d.sh", f), 0o755
			case 1, 2, 3:
				rel = fmt.Sprintf("reference/deep/ref-%03d.md", f)
			default:
				rel = fmt.Sprintf("file-%03d.txt", f)
			}
			off := rng.IntN(len(buf) - size + 1)
			if err := os.WriteFile(filepath.Join(root, rel), buf[off:off+size], mode); err != nil {
				return Tree{}, err
			}
			if err := os.Chmod(filepath.Join(root, rel), mode); err != nil {
				return Tree{}, err
			}
			t.Files++
			t.Bytes += int64(size)
		}
		t.Dirs = append(t.Dirs, root)
	}
	return t, nil
}
