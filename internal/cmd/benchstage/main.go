// Command benchstage runs one airlock copy as a whole process, so that it
// can be timed from outside (hyperfine, /usr/bin/time) side by side with
// cp -a and tar. It is a benchmark tool, not part of the library.
//
//	benchstage -mode gen -shape standard -dst DIR   # write a treegen tree into DIR
//	benchstage -mode stage -src DIR -dst DIR         # first Stage of DIR into the sandbox DIR
//	benchstage -mode materialize -src DIR -dst DIR   # Materialize every subdirectory of DIR
//
// With -rss it prints the process's peak resident set (getrusage maxrss)
// on standard error when done; with -memprofile it writes an allocation
// profile.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/airlockdev/airlock/internal/treegen"
	"github.com/airlockdev/airlock/skills"
	"github.com/airlockdev/airlock/stage"
)

// shapes are the trees -mode gen writes.
var shapes = map[string]treegen.Shape{
	// 20 skills x 100 files, 0.5–16 KiB, four of 2 MiB: 2,000 files, ~25 MB.
	"standard": treegen.Standard,
	// 38 directories x 1,000 files of 128 B–4 KiB: 38,000 files, ~80 MB.
	"pages": treegen.Pages,
	// 100 skills x 1,000 files of 1 KiB: 100,000 files.
	"files100k": {Dirs: 100, Files: 1000, MinBytes: 1024, MaxBytes: 1024, Seed: 2},
	// One skill holding one 1 GiB file (and its SKILL.md).
	"large1g": {Dirs: 1, Files: 2, MinBytes: 1024, MaxBytes: 1024, Large: 1, Large1: 1 << 30, Seed: 3},
}

func main() {
	mode := flag.String("mode", "", "gen, stage or materialize")
	shape := flag.String("shape", "standard", "tree shape for -mode gen: standard, pages, files100k or large1g")
	src := flag.String("src", "", "source tree (stage, materialize)")
	dst := flag.String("dst", "", "destination directory: must be empty or missing")
	rss := flag.Bool("rss", false, "print the peak resident set size (maxrss) on stderr")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile to this file when done")
	repeat := flag.Int("repeat", 1, "run this many times, into dst/0, dst/1, … (for a profile)")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchstage:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	for i := range *repeat {
		out := *dst
		if *repeat > 1 {
			out = filepath.Join(*dst, fmt.Sprint(i))
		}
		if err := run(*mode, *shape, *src, out); err != nil {
			fmt.Fprintln(os.Stderr, "benchstage:", err)
			pprof.StopCPUProfile()
			os.Exit(1)
		}
	}
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchstage:", err)
			os.Exit(1)
		}
	}
	if *rss {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
			fmt.Fprintf(os.Stderr, "maxrss_kib %d\n", ru.Maxrss)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(os.Stderr, "heap_sys_kib %d heap_inuse_kib %d stack_sys_kib %d sys_kib %d gc_cycles %d\n",
			ms.HeapSys>>10, ms.HeapInuse>>10, ms.StackSys>>10, ms.Sys>>10, ms.NumGC)
		if b, err := os.ReadFile("/proc/self/status"); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "VmHWM") || strings.HasPrefix(line, "Rss") {
					fmt.Fprintln(os.Stderr, strings.Join(strings.Fields(line), " "))
				}
			}
		}
	}
}

func run(mode, shape, src, dst string) error {
	if dst == "" {
		return errors.New("-dst is required")
	}
	ctx := context.Background()
	if src != "" {
		abs, err := filepath.Abs(src)
		if err != nil {
			return err
		}
		src = abs
	}
	switch mode {
	case "gen":
		s, ok := shapes[shape]
		if !ok {
			return fmt.Errorf("unknown shape %q", shape)
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		t, err := treegen.Write(dst, s)
		if err != nil {
			return err
		}
		fmt.Printf("%d files, %d bytes\n", t.Files, t.Bytes)
		return nil
	case "stage":
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		d, err := stage.NewDir(dst)
		if err != nil {
			return err
		}
		_, err = stage.Stage(ctx, d, "/rt", []stage.Asset{{Name: "tree", Source: src}})
		return err
	case "materialize":
		ents, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		var sel []skills.Source
		for _, e := range ents {
			if e.IsDir() {
				sel = append(sel, skills.Source{Key: "bench/" + e.Name(), Name: e.Name(), Dir: filepath.Join(src, e.Name())})
			}
		}
		b, err := skills.Materialize(ctx, dst, sel)
		if err != nil {
			return err
		}
		if len(b.Dropped) > 0 {
			return fmt.Errorf("%d skills dropped: %v", len(b.Dropped), b.Dropped[0].Reason)
		}
		return nil
	}
	return fmt.Errorf("unknown -mode %q: want gen, stage or materialize", mode)
}
