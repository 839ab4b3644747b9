package workspace

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/airlockdev/airlock/internal/tree"
	"github.com/airlockdev/airlock/stage"
)

func (r *Round) preparePlain(ctx context.Context) (err error) {
	pr, err := r.probe(ctx)
	if err != nil {
		return err
	}
	if err := pr.checkTools(false); err != nil {
		return err
	}
	rp, wp, err := os.Pipe()
	if err != nil {
		return err
	}
	defer rp.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type walked struct {
		res *tree.Result
		err error
	}
	wdone := make(chan walked, 1)
	var localFailed atomic.Bool
	pats := r.spec.Exclude
	go func() {
		res, err := writeTar(ctx, wp, r.spec.Local, func(rel string, _ bool) bool { return excluded(pats, rel) })
		wp.Close()
		if err != nil {
			localFailed.Store(true) // before the command is stopped: the cause
			cancel()
		}
		wdone <- walked{res, err}
	}()
	script := fmt.Sprintf(`r=%s
mkdir -p "$r" && cd "$r" || { echo "cannot enter $r" >&2; exit 10; }
for f in * .[!.]* ..?*; do
  if [ -e "$f" ] || [ -L "$f" ]; then
    [ "$f" = %s ] && continue
    rm -rf -- "$f" 2>/dev/null || { chmod -R u+rwx -- "$f"; rm -rf -- "$f"; } || { echo "cannot clear $r/$f" >&2; exit 11; }
  fi
done
umask 0
exec tar -x -o -f -
`, q(r.spec.Remote), q(stage.RuntimeDir))
	rerr := runGuest(ctx, r.spec.Runner, "sending the tree to "+r.spec.Remote, stage.Command{Script: script, Stdin: rp}, nil)
	if rerr != nil && !localFailed.Load() {
		// Nobody reads the stream any more (a cut connection stops the
		// Runner's copy): stop the writer rather than wait for it forever.
		cancel()
		rp.Close()
		<-wdone
		return rerr
	}
	w := <-wdone
	if w.err != nil {
		return fmt.Errorf("workspace: reading %s: %w", r.spec.Local, w.err)
	}
	if rerr != nil {
		return rerr
	}
	r.base = w.res.Manifest
	r.o.report(stage.Progress{Asset: "prepare", Files: r.base.Files(), TotalFiles: r.base.Files(), Bytes: r.base.Bytes(), TotalBytes: r.base.Bytes()})
	return r.saveState(ctx)
}

func (r *Round) restorePlainScript() string {
	return fmt.Sprintf(`r=%s; id=%s
cd "$r" 2>/dev/null || { echo "the sandbox directory $r is missing" >&2; exit 10; }
rd=%s
mkdir -p "$rd" 2>/dev/null
# A runtime directory that the sandbox replaced by a file or a link is
# refused (the host lists it); the report then goes beside it.
if [ -d "$rd" ] && [ ! -L "$rd" ]; then rep=./$rd/restore-$id.$$; else rep=./.airlock-restore-$id.$$; rm -f "$rep"; fi
%s > "$rep" 2>/dev/null
n=$(( $(wc -c < "$rep") ))
printf 'airlock-restore 1\nreport %%d\n' "$n"; cat "$rep"; rm -f "$rep"
set --
for f in * .[!.]* ..?*; do
  if [ -e "$f" ] || [ -L "$f" ]; then [ "$f" = "$rd" ] || [ "./$f" = "$rep" ] || set -- "$@" "./$f"; fi
done
if [ $# -eq 0 ]; then printf 'empty\n'; exit 0; fi
printf 'tar\n'
exec tar -c -f - "$@"
`, q(r.spec.Remote), q(r.rec.ID), q(stage.RuntimeDir), findReport)
}

// spoolMax is the largest file held in memory while it is compared; a
// larger one is spooled into the local runtime directory.
const spoolMax = 8 << 20

func (r *Round) restorePlain(ctx context.Context) (*Result, error) {
	res := &Result{}
	l, err := openLocal(r.spec.Local, hashSHA256)
	if err != nil {
		return nil, err
	}
	defer l.close()
	base := map[string]state{}
	for _, e := range r.base.Entries {
		if e.Type == tree.Dir {
			base[e.Path] = state{kind: 'd'}
		} else {
			base[e.Path] = state{kind: 'f', perm: e.Mode.Perm(), id: e.SHA256}
		}
	}
	seen := map[string]bool{}
	var skip []string // refused or excluded directories: nothing below them is looked at
	refuse := func(p, why string) { r.refuse(res, p, why) }
	under := func(p string) bool {
		for _, s := range skip {
			if strings.HasPrefix(p, s+"/") {
				return true
			}
		}
		return false
	}
	type newDir struct {
		path string
		perm fs.FileMode
	}
	var created []newDir
	truncated := false
	var h header
	written := 0
	err = r.restoreStream(ctx, "reading the sandbox directory "+r.spec.Remote, r.restorePlainScript(), nil, func(br *bufio.Reader) error {
		var err error
		if h, err = readHeader(br, false); err != nil {
			return err
		}
		r.refuseReported(h.special, res)
		for p, c := range h.special {
			if !writtenStripped(c) {
				seen[p] = true // refused: its tar member is not looked at
			}
		}
		if h.tail == "empty" {
			return nil
		}
		err = readTar(br, r.o.maxBytes, func(e tarEntry, body io.Reader) error {
			p := e.Path
			switch {
			case p == "":
				refuse(e.Name, "not a clean relative path")
				return nil
			case under(p) || seen[p]:
				return nil
			case !reserved(p) && excluded(r.rec.Exclude, p):
				if e.Mode.IsDir() {
					skip = append(skip, p)
				}
				return nil
			}
			seen[p] = true
			if reserved(p) {
				refuse(p, "under .git or the runtime directory")
				if e.Mode.IsDir() {
					skip = append(skip, p)
				}
				return nil
			}
			if body == nil {
				refuse(p, "over the byte limit")
				return nil
			}
			loc, err := l.stat(p)
			if err != nil {
				return err
			}
			b := base[p]
			switch {
			case e.Mode.IsDir():
				if loc.kind == 0 {
					if err := l.mkdirs(p); err != nil {
						res.Kept = append(res.Kept, p)
						skip = append(skip, p)
						return nil
					}
					if err := l.root.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
						return err
					}
					created = append(created, newDir{p, e.Mode.Perm()})
				} else if loc.kind != 'd' {
					res.Kept = append(res.Kept, p)
					skip = append(skip, p)
				}
				return nil
			case e.Mode&fs.ModeSymlink != 0:
				if !linkInside(p, e.Linkname) {
					refuse(p, "a symbolic link whose target leaves the work tree")
					return nil
				}
				hh := sha256.Sum256([]byte(e.Linkname))
				rem := state{kind: 'l', id: hex.EncodeToString(hh[:])}
				switch {
				case loc.eq(rem):
				case !loc.eq(b):
					res.Kept = append(res.Kept, p)
				default:
					if err := l.writeLink(p, e.Linkname); err != nil {
						res.Kept = append(res.Kept, p)
					} else {
						res.Updated = append(res.Updated, p)
					}
				}
				return nil
			case !e.Mode.IsRegular():
				refuse(p, "a "+tree.Kind(e.Mode)+" or hard link")
				return nil
			case e.Mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0:
				// Written below without those bits (plainFile keeps
				// only the permission bits), and reported.
				refuse(p, reportReason('u'))
			}
			return r.plainFile(l, p, e, body, b, loc, res, &written)
		})
		if errors.Is(err, errTruncated) {
			truncated = true
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !truncated {
		var dirs []string
		for p, b := range base {
			if seen[p] || under(p) {
				continue
			}
			if b.kind == 'd' {
				dirs = append(dirs, p)
				continue
			}
			loc, err := l.stat(p)
			if err != nil {
				return nil, err
			}
			switch {
			case loc.kind == 0:
			case !loc.eq(b):
				res.Kept = append(res.Kept, p)
			default:
				if err := l.remove(p); err != nil {
					res.Kept = append(res.Kept, p)
				} else {
					res.Deleted = append(res.Deleted, p)
				}
			}
		}
		slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		for _, d := range dirs {
			if fi, err := l.root.Lstat(d); err == nil && fi.IsDir() && l.root.Remove(d) == nil {
				res.Deleted = append(res.Deleted, d)
			}
		}
	}
	for i := len(created) - 1; i >= 0; i-- {
		l.root.Chmod(created[i].path, created[i].perm)
	}
	r.o.report(stage.Progress{Asset: "restore", Files: written, TotalFiles: written})
	return res, nil
}

// plainFile compares one regular file from the sandbox with the baseline
// and the local copy, and writes it when the remote change wins.
func (r *Round) plainFile(l *local, p string, e tarEntry, body io.Reader, b, loc state, res *Result, written *int) error {
	hs := sha256.New()
	var content io.Reader
	var spool string
	if e.Size <= spoolMax {
		data, err := io.ReadAll(io.TeeReader(io.LimitReader(body, e.Size), hs))
		if err != nil {
			return cutStream("reading "+p+" from the sandbox", err)
		}
		content = bytes.NewReader(data)
	} else {
		spool = path.Join(stage.RuntimeDir, "spool-"+r.rec.ID)
		if err := l.writeFile(spool, io.TeeReader(body, hs), 0o600); err != nil {
			return fmt.Errorf("workspace: spooling %s: %w", p, err)
		}
		defer l.root.Remove(spool)
	}
	rem := state{kind: 'f', perm: e.Mode.Perm(), id: hex.EncodeToString(hs.Sum(nil))}
	switch {
	case loc.eq(rem):
		return nil
	case !loc.eq(b):
		res.Kept = append(res.Kept, p)
		return nil
	}
	var err error
	if spool != "" {
		if err = l.mkdirs(p); err == nil {
			if err = l.root.Chmod(spool, rem.perm); err == nil {
				err = l.root.Rename(spool, p)
			}
		}
	} else {
		err = l.writeFile(p, content, rem.perm)
	}
	if err != nil {
		res.Kept = append(res.Kept, p)
		r.o.log.Warn("could not write restored file", "round", r.rec.ID, "path", p, "error", err)
		return nil
	}
	*written++
	res.Updated = append(res.Updated, p)
	return nil
}
