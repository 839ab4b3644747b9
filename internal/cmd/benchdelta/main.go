// Command benchdelta times a delta stage against a full stage into the same
// root, through one long-lived Bridge over a local sandbox: each round
// changes one file in N (appends a byte), then stages it as a delta, then
// changes them again and stages with the sandbox's manifest removed (so
// nothing is carried: a full stage that also replaces the previous copy).
// The measure: a delta never costs more than a full stage. Each
// change is left to settle (-settle) before its stage, as an edit made
// seconds or more before a stage is: a younger one is compared first
// whatever the Bridge has learnt (see stage.WithIndex).
//
//	benchdelta -dir /dev/shm/bd -shape pages -every 38000,100,2 -rounds 5
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlockdev/airlock/internal/treegen"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchdelta:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "", "work directory (created; removed at the end)")
	shape := flag.String("shape", "standard", "tree shape (internal/treegen): standard or pages")
	every := flag.String("every", "2000,100,2", "comma-separated: change one file in N")
	rounds := flag.Int("rounds", 5, "rounds of each")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the rounds (delta and full stages) to this file")
	verbose := flag.Bool("v", false, "log each stage's steps (debug level) to stderr")
	settle := flag.Duration("settle", 2100*time.Millisecond, "wait this long after each change, untimed, so that the Index trusts the fingerprint (its racy window is 2 s; 0 stages at once)")
	flag.Parse()
	s, ok := treegen.Shapes[*shape]
	if *dir == "" || !ok {
		return fmt.Errorf("-dir is required and -shape must be standard or pages")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(*dir)
	src, box := filepath.Join(*dir, "src"), filepath.Join(*dir, "box")
	if _, err := treegen.Write(src, s); err != nil {
		return err
	}
	if err := os.MkdirAll(box, 0o755); err != nil {
		return err
	}
	ctx := context.Background()
	b := stage.NewBridge(sandbox.Local(box))
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	assets := []stage.Asset{{Name: "a", Source: src}}
	ix := stage.NewIndex()
	opts := []stage.Option{stage.WithIndex(ix)}
	if *verbose {
		opts = append(opts, stage.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	root := filepath.Join(box, "rt")
	if _, err := stage.Stage(ctx, b, root, assets, opts...); err != nil {
		return err
	}
	fmt.Printf("| tree | changed | delta ms (files sent per round) | full stage ms | delta ÷ full |\n|---|---|---:|---:|---:|\n")
	for _, e := range strings.Split(*every, ",") {
		n, err := strconv.Atoi(e)
		if err != nil || n < 1 {
			return fmt.Errorf("-every: %q is not a positive number", e)
		}
		var delta, full []time.Duration
		var sent []int
		for r := range *rounds {
			for _, whole := range []bool{false, true} {
				if err := change(src, n, r); err != nil {
					return err
				}
				time.Sleep(*settle)
				if whole {
					if err := os.Remove(filepath.Join(root, ".airlock-manifest-a.json")); err != nil {
						return err
					}
				}
				t := time.Now()
				rt, err := stage.Stage(ctx, b, root, assets, opts...)
				d := time.Since(t)
				if err != nil {
					return err
				}
				if whole {
					full = append(full, d)
				} else {
					delta, sent = append(delta, d), append(sent, rt.Assets[0].Sent)
				}
			}
		}
		dm, fm := median(delta), median(full)
		fmt.Printf("| %s | 1 in %d | %.0f (%v) | %.0f | %.2fx |\n", *shape, n, ms(dm), sent, ms(fm), float64(dm)/float64(fm))
	}
	return nil
}

// change appends to one regular file of src in n (in walk order).
func change(src string, n, round int) error {
	k := 0
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		defer func() { k++ }()
		if k%n != 0 {
			return nil
		}
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f, "%d", round)
		return errors.Join(err, f.Close())
	})
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
