package shell_test

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
)

// BenchmarkWriteStream writes the host's tar stream of a tree shaped like
// the 38,000-file benchmark tree (38 directories of 1,000 files, 2 KiB
// each here) to io.Discard: the stream's own cost per file, headers,
// padding and copies, without the walk's file system calls.
func BenchmarkWriteStream(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 2048)
	var names []shell.Entry
	for d := range 38 {
		names = append(names, shell.Entry{Path: fmt.Sprintf("pages.%02d", d), Mode: fs.ModeDir | 0o755})
		for f := range 1000 {
			names = append(names, shell.Entry{Path: fmt.Sprintf("pages.%02d/page-%04d.md", d, f), Mode: 0o644, Size: int64(len(body))})
		}
	}
	mtime := time.Unix(1.8e9, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := shell.WriteStream(io.Discard, mtime, func(fn func(shell.Entry, io.Reader) error) ([]byte, error) {
			for _, e := range names {
				if err := fn(e, bytes.NewReader(body[:e.Size])); err != nil {
					return nil, err
				}
			}
			return []byte("{}"), nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
