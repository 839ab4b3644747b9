package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage"
)

// The values of -progress.
const (
	progressAuto  = "auto"  // off with -json; a bar when stdout and stderr are terminals; lines otherwise
	progressBar   = "bar"   // a progress bar on stderr
	progressLines = "lines" // plain lines on stderr, one each time another tenth is done
	progressOff   = "off"   // nothing (and no extra pass over the source to count it)
)

// progress shows a stage's advance, reported through stage.WithProgress,
// on stderr, so that stdout keeps exactly the report (text or JSON).
// Stage calls update from one goroutine at a time.
type progress struct {
	update func(sandbox.Progress) // nil when off
	finish func() error           // ends the display; returns its first write error
}

// newProgress resolves mode (see the progress* constants) for a run that
// prints its report on stdout and shows progress on stderr.
func newProgress(mode string, asJSON bool, stdout, stderr io.Writer) (progress, error) {
	if mode == progressAuto {
		switch {
		case asJSON:
			mode = progressOff // a program reads stdout; keep stderr for errors
		case isTerminal(stdout) && isTerminal(stderr):
			mode = progressBar
		default:
			mode = progressLines
		}
	}
	switch mode {
	case progressOff:
		return progress{finish: func() error { return nil }}, nil
	case progressLines:
		l := &lines{w: stderr, step: -1}
		return progress{update: l.update, finish: func() error { return l.err }}, nil
	case progressBar:
		b := &bar{w: stderr}
		return progress{update: b.update, finish: b.finish}, nil
	}
	return progress{}, fmt.Errorf("-progress %q: want auto, bar, lines or off", mode)
}

// options returns the stage options that feed the display: none when off.
func (p progress) options() []stage.Option {
	if p.update == nil {
		return nil
	}
	return []stage.Option{stage.WithProgress(p.update)}
}

// isTerminal reports whether w is a terminal (a terminal device, not a
// file or a pipe).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// percent is how much of p is done, 0 to 100: by bytes when the estimate
// has any, else by files; an asset with nothing to count is done.
func percent(p sandbox.Progress) int {
	done, total := p.Bytes, p.TotalBytes
	if total <= 0 {
		done, total = int64(p.Files), int64(p.TotalFiles)
	}
	if total <= 0 {
		return 100
	}
	return int(min(100, done*100/total))
}

// lines writes one plain line when an asset starts and each time it
// passes another tenth, for logs and pipes:
//
//	progress skills 40% (2/3 files, 7/17 bytes)
type lines struct {
	w     io.Writer
	asset string // the asset of the last line
	step  int    // the tenth of the last line, -1 before any
	err   error  // the first write error; later lines are not written
}

func (l *lines) update(p sandbox.Progress) {
	pct := percent(p)
	if l.err != nil || (p.Asset == l.asset && pct/10 <= l.step) {
		return
	}
	l.asset, l.step = p.Asset, pct/10
	_, l.err = fmt.Fprintf(l.w, "progress %s %d%% (%d/%d files, %d/%d bytes)\n",
		p.Asset, pct, p.Files, p.TotalFiles, p.Bytes, p.TotalBytes)
}

// bar draws a progress bar of bytes on a terminal, with the asset and its
// files as the description, and clears it when the stage ends so that the
// report follows on a clean line.
type bar struct {
	w   io.Writer
	bar *progressbar.ProgressBar // made at the first report, when the totals are known
	err error                    // the first error of the bar
}

func (b *bar) update(p sandbox.Progress) {
	desc := fmt.Sprintf("%s %d/%d files", p.Asset, p.Files, p.TotalFiles)
	total := max(p.TotalBytes, 1) // the bar needs a maximum above 0
	if b.bar == nil {
		b.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(b.w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	if total != b.bar.GetMax64() {
		b.bar.ChangeMax64(total) // the estimate was raised
	}
	b.bar.Describe(desc)
	if err := b.bar.Set64(p.Bytes); err != nil && b.err == nil {
		b.err = err
	}
}

func (b *bar) finish() error {
	if b.bar != nil {
		if err := b.bar.Clear(); err != nil && b.err == nil {
			b.err = err
		}
	}
	return b.err
}
