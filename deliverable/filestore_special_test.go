//go:build unix

package deliverable_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
)

// statLiar reports every file it stats as a regular file: a FIFO swapped
// in between the store's stat and its open.
type statLiar struct{ afero.Fs }

func (l statLiar) Stat(name string) (fs.FileInfo, error) {
	fi, err := l.Fs.Stat(name)
	if err != nil {
		return nil, err
	}
	return regularInfo{fi}, nil
}

type regularInfo struct{ fs.FileInfo }

func (regularInfo) Mode() fs.FileMode { return 0o600 }

// TestFileStoreRecordNotRegular: a FIFO or a directory in place of one of
// the store's record files (a task record, an attachment record, a run
// file) is refused at once, never waited on, with an error naming the
// file that is not ErrNotFound; also when the FIFO arrives after the
// store's stat (the open does not block, and the opened file is checked).
// Put replaces a task record that is a FIFO.
func TestFileStoreRecordNotRegular(t *testing.T) {
	type reader struct {
		name string
		file func(t *testing.T, f *taskFixture) string // the record file, put in place
		read func(ctx context.Context, f *taskFixture) error
	}
	var att string
	readers := []reader{
		{"task record", func(t *testing.T, f *taskFixture) string {
			return a23TaskFile(t, f, deliverable.TaskRecord{ID: "T", Objective: "t"})
		}, func(ctx context.Context, f *taskFixture) error { _, err := f.tasks.Task(ctx, "T"); return err }},
		{"attachment record", func(t *testing.T, f *taskFixture) string {
			att = f.register(t, "T", "r", "out.txt", []byte("out\n"))[len("deliverable:"):]
			return filepath.Join(f.dir, "attachments", att+".json")
		}, func(ctx context.Context, f *taskFixture) error { _, err := f.store.Attachment(ctx, att); return err }},
		{"run file", func(t *testing.T, f *taskFixture) string {
			f.register(t, "T", "r", "out.txt", []byte("out\n"))
			runs, err := filepath.Glob(filepath.Join(f.dir, "runs", "*.json"))
			require.NoError(t, err)
			require.Len(t, runs, 1)
			return runs[0]
		}, func(ctx context.Context, f *taskFixture) error {
			_, _, err := f.store.Lookup(ctx, deliverable.Key{TaskID: "T", RunID: "r", IdempotencyKey: "k"})
			return err
		}},
	}
	plants := map[string]func(file string) error{
		"fifo":      func(file string) error { return syscall.Mkfifo(file, 0o600) },
		"directory": func(file string) error { return os.Mkdir(file, 0o700) },
	}
	for _, rd := range readers {
		for kind, plant := range plants {
			for _, liar := range []bool{false, true} {
				name := rd.name + "/" + kind
				if liar {
					name += "/after the stat"
				}
				t.Run(name, func(t *testing.T) {
					f := newTaskFixture(t)
					file := rd.file(t, f)
					require.NoError(t, os.Remove(file))
					require.NoError(t, plant(file))
					if liar {
						var err error
						f.store, err = deliverable.NewFileStore(statLiar{afero.NewOsFs()}, f.dir)
						require.NoError(t, err)
						f.tasks = f.store.Tasks()
					}
					ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
					defer cancel()
					var err error
					a23Within(t, 1500*time.Millisecond, rd.name, func() { err = rd.read(ctx, f) })
					require.Error(t, err)
					assert.NotErrorIs(t, err, deliverable.ErrNotFound)
					assert.ErrorContains(t, err, file+": not a regular file")
					assert.ErrorContains(t, err, "the store file is damaged")
					if rd.name == "task record" && kind == "fifo" {
						require.NoError(t, f.tasks.Put(ctx, deliverable.TaskRecord{ID: "T", Objective: "again"}))
						got, err := f.tasks.Record(ctx, "T")
						require.NoError(t, err)
						assert.Equal(t, "again", got.Objective)
					}
				})
			}
		}
	}
}
