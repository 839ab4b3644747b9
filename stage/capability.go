package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"
	"sync/atomic"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/tree"
	"github.com/airlockdev/airlock/sandbox"
)

// fileGone reports, for a Runner that only reads files, whether the copy
// at dst that the manifest data describes may be gone: the first regular
// file the manifest lists (tree.FirstFile) is not found as one. One lookup
// (max 0: no content is read). Only a clear answer keeps the copy: a
// manifest that lists no file (there is nothing to look up), or a lookup
// that fails otherwise (a path too long for the server, a server that
// reports a lookup through a file as a plain failure, a cut connection),
// counts as gone, so that the asset is published again rather than
// reported staged on a guess. It cannot tell a directory from a link to
// one.
func fileGone(ctx context.Context, fr sandbox.FileReader, dst string, data []byte) bool {
	first, ok := tree.FirstFile(data)
	if !ok {
		return true
	}
	_, err := fr.ReadFile(ctx, path.Join(dst, first), 0)
	return err != nil && !errors.Is(err, ErrLimit)
}

// notDir reports whether the lookup of p through st leaves p in doubt as
// a directory: a link or another file, a failed lookup (the next step
// meets a cut connection), or (with missing) nothing at all. Only a clear
// answer, a directory, keeps it.
func notDir(ctx context.Context, st sandbox.FileStater, p string, missing bool) bool {
	fi, err := st.Lstat(ctx, p)
	if errors.Is(err, fs.ErrNotExist) {
		return missing
	}
	return err != nil || fi == nil || !fi.IsDir()
}

// maxParallelReads bounds the ReadFile calls in flight for one probe.
const maxParallelReads = 16

// inParallel calls fn(0) to fn(tasks-1), at most maxParallelReads at once,
// and closes the channel it returns once they have all returned.
func inParallel(tasks int, fn func(i int)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		sem := make(chan struct{}, maxParallelReads)
		for i := range tasks {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				fn(i)
			})
		}
		wg.Wait()
	}()
	return done
}

// probeFiles reads the manifests of names under root through fr, under the
// control deadline. A manifest that is missing, a link, not a regular file,
// unreadable or over MaxManifestBytes is nil; all of them together may not
// exceed MaxProbeBytes. So is one whose copy is gone: a manifest without
// its copy is what an agent that deletes the asset's directory leaves, or a
// removal (a prune through another connection) that took the directory
// while a publish put its manifest in place, and taking it for the copy
// would report the asset staged (Reused) with nothing there. Where the
// Runner is a sandbox.FileStater, each asset's directory (and the root) is
// looked up beside its manifest: missing, a link, no directory or a
// failed lookup is gone (a link at the root: nothing is staged there, as
// the shell probe has it); elsewhere fileGone judges. A copy in doubt is
// published again, never reported Reused. Alongside, it reads each name's sweep
// marker (shell.SweepMarkerName; at most shell.MaxSweepMarker bytes, the
// content unused) and reports whether one exists: a publish of it was
// killed before it deleted what it moved aside, and the root needs a
// sweep. A marker that is missing, or no regular file, is none; any other
// outcome of its read counts as one (a sweep costs one command; a dead
// connection fails that command).
func (b *Bridge) probeFiles(ctx context.Context, fr sandbox.FileReader, root string, names []string) ([][]byte, bool, error) {
	op := "reading the stored manifests under " + root
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("%s: %w", op, err)
	}
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	n := len(names)
	st, lookup := b.r.(sandbox.FileStater)
	tasks := 2 * n // the manifests, then the markers
	if lookup {
		tasks = 3*n + 1 // then the copies, then the root
	}
	res, gone := make([][]byte, n), make([]bool, n+1) // gone[n]: the root is a link
	var (
		marked atomic.Bool
		mu     sync.Mutex
		total  int64
		first  error
	)
	read := func(i int) {
		switch {
		case i == 3*n:
			gone[n] = notDir(cctx, st, root, false)
			return
		case i >= 2*n:
			gone[i-2*n] = notDir(cctx, st, path.Join(root, names[i-2*n]), true)
			return
		case i >= n:
			_, err := fr.ReadFile(cctx, path.Join(root, shell.SweepMarkerName(names[i-n])), shell.MaxSweepMarker)
			if !errors.Is(err, fs.ErrNotExist) {
				marked.Store(true)
			}
			return
		}
		data, err := fr.ReadFile(cctx, path.Join(root, manifestName(names[i])), MaxManifestBytes)
		if err == nil && !lookup {
			gone[i] = fileGone(cctx, fr, path.Join(root, names[i]), data)
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			total += int64(len(data)) // a manifest whose copy is gone counts too
			if total > MaxProbeBytes {
				err = fmt.Errorf("%w: %s: the sandbox's manifests hold more than %d bytes together", sandbox.ErrProtocol, op, MaxProbeBytes)
				break
			}
			res[i] = data
			return
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission), errors.Is(err, ErrLimit):
			return // no usable manifest
		case !errors.Is(err, ErrTransport):
			err = fmt.Errorf("%w: %s: %w", ErrTransport, op, err)
		}
		if first == nil {
			first = err
		}
	}
	select {
	case <-inParallel(tasks, read):
		if first != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, false, fmt.Errorf("%s: %w", op, cerr)
			}
			return nil, false, first
		}
		for i := range res {
			if gone[i] || gone[n] {
				res[i] = nil // no copy there: the asset is published again
			}
		}
		return res, marked.Load(), nil
	case <-cctx.Done():
		if err := ctx.Err(); err != nil {
			return nil, false, fmt.Errorf("%s: %w", op, err)
		}
		return nil, false, b.timeoutErr(op)
	}
}
