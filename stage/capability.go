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

// copyGone reports whether the copy at dst that the manifest data
// describes is gone: the first regular file the manifest lists
// (tree.FirstFile) is missing, or dst is a file. A manifest without its
// copy is what an agent that deletes the asset's directory leaves, or a
// removal (a prune through another connection) that took the directory
// while a publish put its manifest in place; taking it for the copy would
// report the asset staged (Reused) with nothing there. One lstat through
// fr (max 0: no content is read). Only a lookup's clear answer counts: a
// manifest that lists no file, or a lookup that fails otherwise (a path
// too long for the server, a cut connection: the next step meets it) is
// taken as it is.
func copyGone(ctx context.Context, fr sandbox.FileReader, dst string, data []byte) bool {
	first, ok := tree.FirstFile(data)
	if !ok {
		return false
	}
	_, err := fr.ReadFile(ctx, path.Join(dst, first), 0)
	switch {
	case err == nil, errors.Is(err, ErrLimit):
		return false
	case errors.Is(err, fs.ErrNotExist):
		return true
	}
	// Some SFTP servers (pkg/sftp's) report a lookup through a file
	// (ENOTDIR) as a plain failure: a file at dst itself says gone.
	_, err = fr.ReadFile(ctx, dst, 0)
	return err == nil || errors.Is(err, ErrLimit)
}

// maxParallelReads bounds the ReadFile calls in flight for one probe.
const maxParallelReads = 16

// probeFiles reads the manifests of names under root through fr, under the
// control deadline. A manifest that is missing, a link, not a regular file
// or over MaxManifestBytes is nil, and so is one whose copy is gone
// (copyGone); all of them together may not exceed
// MaxProbeBytes. Alongside, it reads each name's sweep marker
// (shell.SweepMarkerName; at most shell.MaxSweepMarker bytes, the content
// unused) and reports whether one exists: a publish of it was killed
// before it deleted what it moved aside, and the root needs a sweep. A
// marker that is missing, or no regular file, is none; any other outcome
// of its read counts as one (a sweep costs one command; a dead connection
// fails that command).
func (b *Bridge) probeFiles(ctx context.Context, fr sandbox.FileReader, root string, names []string) ([][]byte, bool, error) {
	op := "reading the stored manifests under " + root
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("%s: %w", op, err)
	}
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	res := make([][]byte, len(names))
	var (
		marked atomic.Bool
		mu     sync.Mutex
		total  int64
		first  error
	)
	read := func(i int) {
		if i >= len(names) {
			_, err := fr.ReadFile(cctx, path.Join(root, shell.SweepMarkerName(names[i-len(names)])), shell.MaxSweepMarker)
			if !errors.Is(err, fs.ErrNotExist) {
				marked.Store(true)
			}
			return
		}
		data, err := fr.ReadFile(cctx, path.Join(root, manifestName(names[i])), MaxManifestBytes)
		gone := err == nil && copyGone(cctx, fr, path.Join(root, names[i]), data)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil && gone:
			return // a manifest without its copy: the asset is published again
		case err == nil:
			total += int64(len(data))
			if total > MaxProbeBytes {
				err = fmt.Errorf("%w: %s: the sandbox's manifests hold more than %d bytes together", sandbox.ErrProtocol, op, MaxProbeBytes)
				break
			}
			res[i] = data
			return
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, ErrLimit):
			return // no usable manifest
		case !errors.Is(err, ErrTransport):
			err = fmt.Errorf("%w: %s: %w", ErrTransport, op, err)
		}
		if first == nil {
			first = err
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		sem := make(chan struct{}, maxParallelReads)
		for i := range 2 * len(names) {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				read(i)
			})
		}
		wg.Wait()
	}()
	select {
	case <-done:
		if first != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, false, fmt.Errorf("%s: %w", op, cerr)
			}
			return nil, false, first
		}
		return res, marked.Load(), nil
	case <-cctx.Done():
		if err := ctx.Err(); err != nil {
			return nil, false, fmt.Errorf("%s: %w", op, err)
		}
		return nil, false, b.timeoutErr(op)
	}
}
