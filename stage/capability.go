package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sync"

	"github.com/airlockdev/airlock/sandbox"
)

// maxParallelReads bounds the ReadFile calls in flight for one probe.
const maxParallelReads = 16

// probeFiles reads the manifests of names under root through fr, under the
// control deadline. A manifest that is missing, a link, not a regular file
// or over MaxManifestBytes is nil; all of them together may not exceed
// MaxProbeBytes.
func (b *Bridge) probeFiles(ctx context.Context, fr sandbox.FileReader, root string, names []string) ([][]byte, error) {
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
