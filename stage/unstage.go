package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// Pruner is an optional interface of a Target: one that can list and remove
// the assets it staged. Unstage and WithPrune need it; Dir, Bridge and
// remote.Host implement it.
type Pruner interface {
	// Assets returns, sorted, the names of the assets staged under root:
	// those with a stored manifest (and those a killed command or host
	// left without one, beside their sweep marker). A missing root has
	// none.
	Assets(ctx context.Context, root string) ([]string, error)
	// Remove removes each named asset directory and its manifest. Each
	// goes in one step for a reader: its manifest leaves first, then the
	// directory is renamed away and only then deleted, so no reader sees a
	// partial tree. A name that is not staged is not an error. (A
	// removal killed between the two renames leaves the directory
	// without its manifest, beside the asset's sweep marker, which has
	// Assets list it still: the next prune or Unstage removes it.) Dir,
	// Bridge and remote.Host remove nothing and fail with ErrBadRoot
	// when a file system is mounted on a named asset's directory, inside
	// it, or on a part of it seen elsewhere (where the sandbox has
	// /proc/self/mountinfo: Linux): the deletion would reach the files
	// there.
	Remove(ctx context.Context, root string, names []string) error
}

// GuardedPruner is an optional interface of a Pruner whose sandbox may
// share the host's file system (Dir, Bridge and remote.Host implement
// it): WithPrune uses it so that a prune never deletes the Source of an
// asset it keeps, as when a user made a staged copy, or a directory
// inside one, the Source of another asset of the same call.
type GuardedPruner interface {
	Pruner
	// RemoveGuarded is Remove, except that when a named asset's
	// directory is, in the sandbox, one of the host directories sources
	// (whatever links lead there) or a directory above one, it removes
	// nothing and fails with an error wrapping ErrBadRoot.
	RemoveGuarded(ctx context.Context, root string, names, sources []string) error
}

// ErrNoPrune reports a Target that does not implement Pruner.
var ErrNoPrune = errors.New("target cannot list or remove staged assets (it does not implement stage.Pruner)")

// Unstage removes the named assets (directories and manifests) from root on
// t. A name that is not staged is not an error.
func Unstage(ctx context.Context, t Target, root string, names ...string) error {
	if err := checkRoot(root); err != nil {
		return err
	}
	for _, n := range names {
		if err := checkName(n); err != nil {
			return fmt.Errorf("%w: %v", ErrBadAsset, err)
		}
	}
	p, ok := t.(Pruner)
	if !ok {
		return fmt.Errorf("stage: unstaging under %s: %w", root, ErrNoPrune)
	}
	if len(names) == 0 {
		return nil
	}
	if err := p.Remove(ctx, root, names); err != nil {
		return &AssetError{Op: "unstage", Name: strings.Join(names, ","), Path: root, Err: err}
	}
	return nil
}

// WithPrune makes Stage remove, after staging, every asset under the root
// that it was not given (see Unstage), so that a run sees only the assets it
// selected: a run whose skills were all dropped can stage no asset and still
// leave no skills directory from an earlier run. The Target must implement
// Pruner. When it is a GuardedPruner, a prune that would delete the
// Source of an asset of the call (a staged copy used as a Source, in a
// sandbox that shares the host's file system) removes nothing and fails
// with ErrBadRoot; the assets are staged. Default: off.
func WithPrune() Option {
	return func(o *options) { o.prune = true }
}

// prune removes the assets under root that keep does not name.
func (s *stager) prune(keep []*planned) error {
	p, ok := s.t.(Pruner)
	if !ok {
		return fmt.Errorf("stage: WithPrune under %s: %w", s.root, ErrNoPrune)
	}
	have, err := p.Assets(s.ctx, s.root)
	if err != nil {
		return fmt.Errorf("stage: listing the assets under %s: %w", s.root, err)
	}
	var gone []string
	for _, n := range have {
		if checkName(n) != nil {
			continue // not a name Stage could have staged: not ours
		}
		if !slices.ContainsFunc(keep, func(p *planned) bool { return p.asset.Name == n }) {
			gone = append(gone, n)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	if g, ok := p.(GuardedPruner); ok {
		sources := make([]string, len(keep))
		for i, k := range keep {
			sources[i] = k.asset.Source
		}
		err = g.RemoveGuarded(s.ctx, s.root, gone, sources)
	} else {
		err = p.Remove(s.ctx, s.root, gone)
	}
	if err != nil {
		return &AssetError{Op: "prune", Name: strings.Join(gone, ","), Path: s.root, Err: err}
	}
	s.o.log.Debug("stage: pruned", "root", s.root, "assets", gone)
	return nil
}

// assetNames turns manifest file names into asset names, leaving out
// those no asset can have (checkName): a sandbox that plants a manifest
// or a sweep marker named ".airlock-manifest-...json" or
// ".airlock-sweep-.." lists no "..", which Unstage would refuse.
func assetNames(files []string) []string {
	var out []string
	for _, f := range files {
		if n, ok := strings.CutPrefix(f, manifestPrefix); ok {
			if n, ok = strings.CutSuffix(n, manifestSuffix); ok && checkName(n) == nil {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var (
	_ GuardedPruner = (*Dir)(nil)
	_ GuardedPruner = (*Bridge)(nil)
)

// Assets implements Pruner.
func (d *Dir) Assets(ctx context.Context, root string) ([]string, error) {
	rr, err := d.openRoot(root, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer rr.Close()
	f, err := rr.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, de := range des {
		if de.Type().IsRegular() {
			files = append(files, de.Name())
		}
		// A copy a killed host left without its manifest, beside its
		// marker (see dirmark.go), unless a publish of this process or
		// another live one is at work on it.
		if n, ok := strings.CutPrefix(de.Name(), sweepPrefix); ok && checkName(n) == nil && orphan(rr, n) && markerGone(rr, de.Name()) {
			files = append(files, manifestName(n))
		}
	}
	return assetNames(files), nil
}

// Remove implements Pruner.
func (d *Dir) Remove(ctx context.Context, root string, names []string) error {
	return d.RemoveGuarded(ctx, root, names, nil)
}

// RemoveGuarded implements GuardedPruner.
func (d *Dir) RemoveGuarded(ctx context.Context, root string, names, sources []string) error {
	rr, err := d.openRoot(root, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer rr.Close()
	guard, mounts := guardIDs(sources), hostMounts()
	for _, name := range names {
		fi, err := rr.Lstat(name)
		if err != nil || !fi.IsDir() {
			continue
		}
		if isSource(fi, guard) {
			return keptSourceErr(path.Join(root, name))
		}
		if m := mountInside(mounts, filepath.Join(rr.Name(), name)); m != "" {
			return mountErr(path.Join(root, name), m)
		}
	}
	d.sweep(rr)
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		unlock, err := d.locks.Lock(ctx, root+"\x00"+name)
		if err != nil {
			return err
		}
		err = d.removeOne(rr, root, name)
		unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *Dir) removeOne(rr *os.Root, root, name string) error {
	tmp, err := tempName(d.rand, name)
	if err != nil {
		return err
	}
	if err := d.mkTemp(rr, tmp); err != nil {
		return fmt.Errorf("creating temporary directory %s: %w", path.Join(root, tmp), err)
	}
	d.mark(rr, tmp, name)
	for _, n := range shell.AssetNames(name) {
		if n == name {
			movable(rr, n)
		}
		if err := rr.Rename(n, tmp+"/"+n); errors.Is(err, fs.ErrNotExist) {
			continue // not there, or removed meanwhile (another process's unstage): gone, as asked
		} else if err != nil {
			d.disown(rr, tmp, name) // before the drop: it is written in tmp
			left, rerr := d.drop(rr, tmp)
			if rerr != nil {
				rerr = fmt.Errorf("the temporary directory %s could not be deleted; remove %s by hand: %w", leftAt(root, tmp, left), path.Join(root, left), rerr)
			}
			return errors.Join(fmt.Errorf("moving %s aside: %w", path.Join(root, n), err), rerr)
		}
		d.hookMoved(n)
	}
	d.unmark(rr, name)
	if left, err := d.drop(rr, tmp); err != nil {
		return fmt.Errorf("asset %s removed, but %s could not be deleted; remove %s by hand: %w", path.Join(root, name), leftAt(root, tmp, left), path.Join(root, left), err)
	}
	return nil
}

// Assets implements Pruner: one control command (shell.AssetsScript),
// and a sweep of the root (sweepRoot) when its reply says a sweep would
// remove something, as a probe that finds leftovers has. A
// stage root that is a symbolic link is refused with an error, never
// followed. A sandbox whose listing is longer than shell.MaxAssetList
// breaks the protocol: the command is stopped and the error wraps
// sandbox.ErrProtocol.
func (b *Bridge) Assets(ctx context.Context, root string) ([]string, error) {
	out := &limitedBuffer{Max: shell.MaxAssetList}
	if err := b.control(ctx, "listing the assets under "+root, sandbox.Command{Script: shell.AssetsScript(root, b.inflight.under(root)), Stdout: out}); err != nil {
		return nil, err
	}
	if shell.AssetListLeftovers(out.Bytes()) {
		// What a cut removal or publish left behind: a prune may have
		// nothing else to run.
		if err := b.sweepRoot(ctx, root); err != nil {
			return nil, err
		}
	}
	return assetNames(shell.ParseAssetList(out.Bytes())), nil
}

// Remove implements Pruner: one command for all names
// (shell.RemoveScript). Each asset's manifest and directory are moved into
// a fresh temporary directory (the control part: renames only), which is
// then deleted outside the control deadline (see renameThenDelete); the
// command also sweeps the root, so an unstage removes what killed hosts
// left behind. A stage root that is a symbolic link is refused with an
// error, never followed.
func (b *Bridge) Remove(ctx context.Context, root string, names []string) error {
	return b.RemoveGuarded(ctx, root, names, nil)
}

// RemoveGuarded implements GuardedPruner: Remove, whose command first
// compares the device and inode of each named asset's directory with
// those of sources and the directories above them (shell.RemoveScript).
func (b *Bridge) RemoveGuarded(ctx context.Context, root string, names, sources []string) error {
	if len(names) == 0 {
		return nil
	}
	// The names' publishes and removals through this Bridge wait for the
	// command (Dir holds the same locks, one name at a time); sorted, so
	// that two removals never wait for each other.
	for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
		unlock, err := b.locks.Lock(ctx, root+"\x00"+name)
		if err != nil {
			return err
		}
		defer unlock()
	}
	// Named and registered as a publish's is, so that this Bridge's sweeps
	// leave it alone: where every command has a PID namespace of its own
	// (bwrap), a sweep cannot tell its live owner from a dead one.
	tmp, err := b.inflight.add(b.rand, root, "unstage")
	if err != nil {
		return err
	}
	defer b.inflight.remove(tmp)
	script := shell.RemoveScript(root, path.Base(tmp), b.inflight.under(root), names, guardIDs(sources))
	err = raced(b.renameThenDelete(ctx, "removing assets under "+root, sandbox.Command{Script: script}))
	what := "the directory of one of the assets " + strings.Join(names, ", ") + " under " + root
	if len(names) == 1 {
		what = path.Join(root, names[0])
	}
	return refusal(err, what, func() error { return keptSourceErr(what) })
}
