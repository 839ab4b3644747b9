package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"
	"time"
)

// FileReader is an optional capability of a Runner: reading one file of the
// sandbox without running a shell (remote.Host reads over SFTP). Bridge
// uses it, when the Runner has it, to read the stored manifests in Probe
// after its first probe (which learns the sandbox's tools through the
// shell): one request per manifest, all at once, and no process in the
// sandbox.
type FileReader interface {
	// ReadFile returns the content of the regular file at the absolute
	// sandbox path p. A file that is missing, is a symbolic link (at its
	// last component) or is not a regular file is an error wrapping
	// fs.ErrNotExist; a file of more than max bytes is an error wrapping
	// ErrLimit, and its content is not read past max. Any other failure is
	// a transport failure (ErrTransport).
	ReadFile(ctx context.Context, p string, max int64) ([]byte, error)
}

// maxParallelReads bounds the ReadFile calls in flight for one probe.
const maxParallelReads = 16

// probeFiles reads the manifests of names under root through fr, under the
// control deadline. A manifest that is missing, a link, not a regular file
// or over MaxManifestBytes is nil; all of them together may not exceed
// MaxProbeBytes.
func (b *Bridge) probeFiles(ctx context.Context, fr FileReader, root string, names []string) ([][]byte, error) {
	op := "reading the stored manifests under " + root
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	res := make([][]byte, len(names))
	done := make(chan error, 1)
	go func() {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int64
			first error
		)
		sem := make(chan struct{}, maxParallelReads)
		for i, n := range names {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				data, err := fr.ReadFile(cctx, path.Join(root, manifestName(n)), MaxManifestBytes)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					total += int64(len(data))
					if total > MaxProbeBytes {
						err = fmt.Errorf("%w: %s: the sandbox's manifests hold more than %d bytes together", ErrTransport, op, MaxProbeBytes)
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
			}()
		}
		wg.Wait()
		done <- first
	}()
	select {
	case err := <-done:
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, fmt.Errorf("%s: %w", op, cerr)
			}
			return nil, err
		}
		return res, nil
	case <-cctx.Done():
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		return nil, b.timeoutErr(op)
	}
}

// ControlTimeouter is an optional capability of a Runner: a control
// deadline of its own, shorter than MaxControlTimeout (remote.Host reports
// its Config.ControlTimeout). Every package that runs control steps through
// a Runner (stage.Bridge, workspace, deliverable) bounds them by
// ControlDeadline. A Runner that wraps another (to set a default Dir, to
// log) should implement it too and return ControlDeadline of the one it
// wraps, or the setting is lost.
type ControlTimeouter interface {
	// ControlTimeout returns the deadline of one control step; zero or
	// less means MaxControlTimeout.
	ControlTimeout() time.Duration
}

// ControlDeadline returns the deadline of one control step through r:
// MaxControlTimeout, or r's own ControlTimeout when r is a
// ControlTimeouter that reports a shorter positive one.
func ControlDeadline(r Runner) time.Duration {
	if ct, ok := r.(ControlTimeouter); ok {
		return clampControl(ct.ControlTimeout())
	}
	return MaxControlTimeout
}

// clampControl maps d onto (0, MaxControlTimeout]: d <= 0 means
// MaxControlTimeout.
func clampControl(d time.Duration) time.Duration {
	if d <= 0 || d > MaxControlTimeout {
		return MaxControlTimeout
	}
	return d
}
