//go:build !linux

package stage

import (
	"io/fs"
	"os"
)

// rootDir is a directory of the metadata pass on platforms without the
// Linux descriptor calls. It cannot see change times, so its fingerprints
// are never usable: WithIndex always hashes here; the pass still counts
// files and bytes for progress.
type rootDir struct{ r *os.Root }

func openFPRoot(src string) (fpDir, fpStat, error) {
	r, err := os.OpenRoot(src)
	if err != nil {
		return nil, fpStat{}, err
	}
	fi, err := r.Lstat(".")
	if err != nil {
		r.Close()
		return nil, fpStat{}, err
	}
	return rootDir{r}, toFPStat(fi), nil
}

func (d rootDir) names() ([]string, error) {
	f, err := d.r.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func (d rootDir) lstat(name string) (fpStat, error) {
	fi, err := d.r.Lstat(name)
	if err != nil {
		return fpStat{}, err
	}
	return toFPStat(fi), nil
}

func (d rootDir) open(name string) (fpDir, error) {
	r, err := d.r.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	return rootDir{r}, nil
}

func (d rootDir) close() { d.r.Close() }

func toFPStat(fi fs.FileInfo) fpStat {
	return fpStat{mode: fi.Mode().Type() | fi.Mode().Perm(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}
