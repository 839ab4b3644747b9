package stage

import (
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// ControlTimeout returns the deadline each control operation runs under.
func (b *Bridge) ControlTimeout() time.Duration { return b.timeout }

// Path returns the host directory that plays the sandbox.
func (d *Dir) Path() string { return d.path }

// HostPath returns the host path of the sandbox path p (absolute, clean).
func (d *Dir) HostPath(p string) string {
	return filepath.Join(d.path, filepath.FromSlash(strings.TrimPrefix(path.Clean("/"+p), "/")))
}

// SetRand makes t draw its temporary names from r.
func SetRand(t Target, r io.Reader) {
	switch x := t.(type) {
	case *Dir:
		x.rand = r
	case *Bridge:
		x.rand = r
	}
}

// WithRacyWindow replaces racyWindow, so that tests need not wait for their
// fresh files to age.
func WithRacyWindow(d time.Duration) Option { return func(o *options) { o.racy = d } }

// IndexFiles overwrites the file count the index remembers for every
// source, so that a test can tell an index hit from a walk.
func IndexFiles(ix *Index, files int) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for k, r := range ix.m {
		r.files = files
		ix.m[k] = r
	}
}

var ReadTarStream = readTarStream

// SetRemove makes d remove its temporary directories with rm.
func SetRemove(d *Dir, rm func(r *os.Root, name string) error) { d.rm = rm }

// SetMaxEmbeddedCarry lowers the size of a carry that travels inside the
// send command's script, for the test's duration.
func SetMaxEmbeddedCarry(t interface{ Cleanup(func()) }, n int) {
	old := maxEmbeddedCarry
	maxEmbeddedCarry = n
	t.Cleanup(func() { maxEmbeddedCarry = old })
}

// TwoSessions has the Bridge publish by a command of its own even where
// the sandbox's tar would let the send command publish (the path of
// sandboxes whose tar reads to the end of its input).
func TwoSessions() BridgeOption { return func(b *Bridge) { b.twoSessions = true } }

// SetMade makes d call made once a temporary directory exists, before its
// owner file is written.
func SetMade(d *Dir, made func()) { d.made = made }

// SetMoved makes d call moved once a publish or removal has moved name
// (a manifest, a copy).
func SetMoved(d *Dir, moved func(name string)) { d.moved = moved }

// SetPhaseHook makes b call fn at each transition of a Publish, with the
// publish's error so far.
func SetPhaseHook(b *Bridge, fn func(from, to string, err error)) {
	b.onPhase = func(f, t phase, err error) { fn(f.String(), t.String(), err) }
}

// PhaseName returns the name of the i-th phase.
func PhaseName(i int) string { return phase(i).String() }

// SetLinkCosts sets what b has learnt of its sandbox (linkCosts): seconds
// per tar byte sent and per file carried; 0 for not known.
func SetLinkCosts(b *Bridge, perByte, perFile float64) {
	b.costs.mu.Lock()
	defer b.costs.mu.Unlock()
	b.costs.perByte, b.costs.perFile = perByte, perFile
}

// CompareCost returns the seconds per file that b has learnt a comparing
// walk costs, where Stage left it to b (0: not known).
func CompareCost(b *Bridge) float64 {
	b.costs.mu.Lock()
	defer b.costs.mu.Unlock()
	return b.costs.perCompare
}

// LinkCosts returns what b has learnt of its sandbox (see SetLinkCosts).
func LinkCosts(b *Bridge) (perByte, perFile float64) {
	b.costs.mu.Lock()
	defer b.costs.mu.Unlock()
	return b.costs.perByte, b.costs.perFile
}
