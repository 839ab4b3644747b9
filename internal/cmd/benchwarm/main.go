// Command benchwarm times a one-changed-file stage on a warm connection, as
// a host process that keeps its remote.Host open stages again: each run
// rewrites one file, then stages through the open Host; beside it, in the
// same rounds, rsync over an OpenSSH ControlMaster connection (its warm
// equivalent) and a bare command ("true") through the Host, the floor of
// any command. examples/stage/bench.sh runs it (scenario
// ssh-one-changed-warm); it prints one tab-separated line per contender:
// name, median seconds.
//
//	benchwarm -ssh-config F -host bench -src DIR -root /abs/dst -file DIR/a/b -rsync-dst /abs/dst/rsync -runs 15
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchwarm:", err)
		os.Exit(1)
	}
}

func run() error {
	cfgFile := flag.String("ssh-config", "", "ssh_config file naming -host")
	host := flag.String("host", "bench", "host alias in -ssh-config")
	src := flag.String("src", "", "host directory to stage")
	root := flag.String("root", "", "stage root in the sandbox")
	file := flag.String("file", "", "the file under -src each run rewrites")
	rsyncDst := flag.String("rsync-dst", "", "rsync's destination in the sandbox")
	runs := flag.Int("runs", 15, "runs of each contender")
	flag.Parse()
	if *cfgFile == "" || *src == "" || *root == "" || *file == "" || *rsyncDst == "" {
		return fmt.Errorf("-ssh-config, -src, -root, -file and -rsync-dst are required")
	}
	ctx := context.Background()
	addr, cfg, err := remote.LoadSSHConfig(*host, remote.WithSSHConfigFiles(*cfgFile, ""))
	if err != nil {
		return err
	}
	h, err := remote.Dial(ctx, addr, cfg)
	if err != nil {
		return err
	}
	defer h.Close()
	ctl := filepath.Join(os.TempDir(), fmt.Sprintf("benchwarm-%d.ctl", os.Getpid()))
	if err := exec.Command("ssh", "-F", *cfgFile, "-o", "ControlMaster=yes", "-o", "ControlPath="+ctl, "-o", "ControlPersist=300", "-fN", *host).Run(); err != nil {
		return fmt.Errorf("starting the ControlMaster connection: %w", err)
	}
	defer exec.Command("ssh", "-F", *cfgFile, "-o", "ControlPath="+ctl, "-O", "exit", *host).Run()
	ix := stage.NewIndex()
	var sent []int // files each airlock run sent: 1 when it carried the rest
	assets := []stage.Asset{{Name: "airlock", Source: *src}}
	rsync := func() error {
		return exec.Command("rsync", "-a", "-e", "ssh -F "+*cfgFile+" -o ControlPath="+ctl, *src+"/", *host+":"+*rsyncDst+"/").Run()
	}
	contenders := []struct {
		name string
		run  func() error
	}{
		{"airlock (warm Host)", func() error {
			rt, err := stage.Stage(ctx, h, *root, assets, stage.WithIndex(ix))
			if err == nil {
				sent = append(sent, rt.Assets[0].Sent)
			}
			return err
		}},
		{"rsync (ControlMaster)", rsync},
		{"true through the Host", func() error { return h.Run(ctx, sandbox.Command{Script: "true"}) }},
	}
	times := make([][]time.Duration, len(contenders))
	for r := -1; r < *runs; r++ { // run -1 is the warmup (the first copies)
		for i, c := range contenders {
			if err := os.WriteFile(*file, fmt.Appendf(nil, "run %d of %s\n", r, c.name), 0o644); err != nil {
				return err
			}
			t := time.Now()
			if err := c.run(); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if r >= 0 {
				times[i] = append(times[i], time.Since(t))
			}
		}
	}
	fmt.Fprintf(os.Stderr, "benchwarm: files sent by each airlock run (the first is the first copy): %v\n", sent)
	for i, c := range contenders {
		slices.Sort(times[i])
		fmt.Printf("%s\t%.6f\n", c.name, times[i][len(times[i])/2].Seconds())
	}
	return nil
}
