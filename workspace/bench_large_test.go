package workspace_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/internal/sshdtest"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/stage/remote/remotetest"
	"github.com/airlockdev/airlock/workspace"
)

// largeShape is the repository BenchmarkPrepareLargeHistory prepares:
// files in dirs*subdirs*perDir paths, one commit that adds them all, then
// commits-1 commits that each change touch files.
type largeShape struct{ dirs, subdirs, perDir, commits, touch int }

var large = largeShape{dirs: 40, subdirs: 25, perDir: 40, commits: 15000, touch: 3}

func (s largeShape) files() int { return s.dirs * s.subdirs * s.perDir }

func (s largeShape) key() string {
	return fmt.Sprintf("airlock-bench-large-v1-%dx%dx%d-c%d-t%d", s.dirs, s.subdirs, s.perDir, s.commits, s.touch)
}

func (s largeShape) path(n int) string {
	d, rest := n/(s.subdirs*s.perDir), n%(s.subdirs*s.perDir)
	return fmt.Sprintf("mod%02d/pkg%02d/file%03d.go", d, rest/s.perDir, rest%s.perDir)
}

// fastImport writes the shape's history as a git fast-import stream: the
// files are a few hundred bytes of Go-like text each, and every later
// commit appends a line to touch files picked by a fixed pseudo-random
// sequence, so the stream (and the repository) is the same every time.
func (s largeShape) fastImport(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	body := make([][]byte, s.files())
	for n := range body {
		var sb strings.Builder
		fmt.Fprintf(&sb, "package pkg%d\n\n// File %d of the large benchmark repository.\n", n/s.perDir, n)
		for l := range 8 + n%17 {
			fmt.Fprintf(&sb, "func f%d_%d(x int) int { return x*%d + %d }\n", n, l, l+3, n%97)
		}
		body[n] = []byte(sb.String())
	}
	const t0 = 1700000000
	commit := func(i int, paths []int) {
		msg := fmt.Sprintf("commit %d\n", i)
		fmt.Fprintf(bw, "commit refs/heads/main\nmark :%d\nauthor Bench <bench@example.com> %d +0000\ncommitter Bench <bench@example.com> %d +0000\ndata %d\n%s", i+1, t0+i*60, t0+i*60, len(msg), msg)
		if i > 0 {
			fmt.Fprintf(bw, "from :%d\n", i)
		}
		for _, n := range paths {
			fmt.Fprintf(bw, "M 100644 inline %s\ndata %d\n", s.path(n), len(body[n]))
			bw.Write(body[n])
			bw.WriteByte('\n')
		}
		bw.WriteByte('\n')
	}
	all := make([]int, s.files())
	for n := range all {
		all[n] = n
	}
	commit(0, all)
	x := uint32(12345)
	for i := 1; i < s.commits; i++ {
		paths := make([]int, 0, s.touch)
		for range s.touch {
			x = x*1664525 + 1013904223
			n := int(x>>8) % s.files()
			body[n] = fmt.Appendf(body[n], "// change %d\n", i)
			paths = append(paths, n)
		}
		commit(i, paths)
	}
	bw.WriteString("done\n")
	return bw.Flush()
}

// largeRepo returns the shape's repository, built once under
// os.TempDir() (keyed by the shape) and reused by later runs: the history
// by git fast-import, packed by git gc, checked out, then a few dirty
// edits (two tracked files changed, one of them staged, one untracked
// file).
func largeRepo(b *testing.B, s largeShape) string {
	b.Helper()
	cache := filepath.Join(os.TempDir(), s.key())
	repo := filepath.Join(cache, "repo")
	if _, err := os.Stat(filepath.Join(cache, "done")); err == nil {
		return repo
	}
	start := time.Now()
	if err := os.RemoveAll(cache); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(repo, 0o755); err != nil {
		b.Fatal(err)
	}
	sh := func(script string, stdin func(io.Writer) error) {
		cmd := exec.Command("/bin/sh", "-c", "set -e; "+gitIsolation+script)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), gitEnv...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		var werr error
		var wg sync.WaitGroup
		if stdin != nil {
			pr, pw := io.Pipe()
			cmd.Stdin = pr
			wg.Go(func() {
				werr = stdin(pw)
				pw.CloseWithError(werr)
			})
		}
		err := cmd.Run()
		wg.Wait()
		if err != nil || werr != nil {
			b.Fatalf("building the large repository in %s: %s: %v (stream: %v): %s", repo, script, err, werr, stderr.String())
		}
	}
	sh("git init -q -b main", nil)
	sh("git fast-import --quiet", s.fastImport)
	sh("git gc -q && git reset -q --hard", nil)
	sh(fmt.Sprintf("echo dirty >> %[1]s && echo staged >> %[2]s && git add %[2]s && echo new > untracked.txt", s.path(7), s.path(s.files()-1)), nil)
	if err := os.WriteFile(filepath.Join(cache, "done"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("built the large repository (%d files, %d commits) in %s: %s", s.files(), s.commits, repo, time.Since(start).Round(time.Millisecond))
	return repo
}

// BenchmarkPrepareLargeHistory measures Prepare on a repository of
// 15,000 commits and 40,000 files (largeRepo; the first run builds it,
// about a minute), against its manual baseline in the same run, over each
// transport (local; remote.Host to remotetest; a real sshd, skipped
// without one):
//
//   - prepare/T: workspace.Prepare into a fresh sandbox directory; the
//     snapshot-ns/op metric is the time until Prepare starts the sandbox
//     script (opening the repository, the probe and the host's snapshot),
//     ship-ns/op the rest (the bundle streamed into the sandbox's fetch
//     and checkout), bundle-MB what crossed the transport.
//   - manual/T: BenchmarkRoundTrip's manual prepare: git bundle create
//     --all | T git clone, and a tar of the dirty files | T tar x.
//   - manual-tar/T: git bundle create --all, then tar c of the bundle and
//     the whole work tree | T tar x, git init, fetch of the bundle, read-tree
//     and update-index --refresh (the index as a clone leaves it).
//
// and the parts, each against its manual command:
//
//   - bundle/workspace: the bundle Prepare writes (git bundle create
//     --stdin of one ref to the snapshot commit); bundle/manual: git
//     bundle create --all (both to a file).
//   - snapshot/workspace: Prepare's host commands (a copy of the index,
//     write-tree, add -A, write-tree, two commit-trees, into a quarantine
//     directory); snapshot/manual: the tar of the dirty files;
//     snapshot/manual-tar: the tar of the whole work tree.
//   - checkout/workspace/T: shell.GitPrepareScript with that bundle (made
//     beforehand) on stdin; checkout/manual/T: the bundle made beforehand
//     | T git clone, and the dirty tar | T tar x.
//
// With AIRLOCK_BENCH_TRACE2=FILE every git command (the host's and, over
// the local transport, the sandbox's) appends its trace2 events to FILE,
// to tell which git command the time goes to.
//
//	go test -run '^$' -bench BenchmarkPrepareLargeHistory -benchtime 2x ./workspace/
func BenchmarkPrepareLargeHistory(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skipf("git is not on PATH (%v): BenchmarkPrepareLargeHistory measures git work trees; install git to run it", err)
	}
	src := largeRepo(b, large)
	base := b.TempDir()
	local := filepath.Join(base, "local")
	if out, err := exec.Command("cp", "-a", src, local).CombinedOutput(); err != nil {
		b.Fatalf("copying %s: %v: %s", src, err, out)
	}
	trace := os.Getenv("AIRLOCK_BENCH_TRACE2")
	if trace != "" {
		// The host's git (gitexec passes no GIT_* variable on) reads the
		// repository's configuration.
		localSh(b, `cd `+shell.Quote(local)+` && git config trace2.eventTarget `+shell.Quote(trace), nil, nil)
	}
	l := shell.Quote(local)
	xfer := filepath.Join(base, "xfer") // files made beforehand, outside the work tree
	if err := os.Mkdir(xfer, 0o755); err != nil {
		b.Fatal(err)
	}
	x := shell.Quote(xfer)
	// The snapshot Prepare makes (made by the same commands, once), the
	// bundle Prepare sends of it, and the manual baseline's bundle and
	// dirty tar.
	var ids strings.Builder
	localSh(b, `cd `+l+` && `+snapshotScript(xfer)+` && echo "$s $i $(git rev-parse HEAD)"`, nil, &ids)
	f := strings.Fields(ids.String())
	if len(f) != 3 {
		b.Fatalf("the snapshot script printed %q, want three object names", ids.String())
	}
	snap, idxTree, head := f[0], f[1], f[2]
	const snapRef = "refs/bench/snap"
	localSh(b, `cd `+l+` && git update-ref `+snapRef+` `+snap+` && echo `+snapRef+` | git bundle create -q `+x+`/snap.bundle --stdin && git bundle create -q `+x+`/all.bundle --all && `+dirtyFiles+` | tar -c -f `+x+`/dirty.tar -T -`, nil, nil)

	type transportOf struct {
		runner func(b *testing.B) sandbox.Runner
		manual func(b *testing.B) transport
	}
	transports := map[string]transportOf{
		"local": {
			runner: func(*testing.B) sandbox.Runner {
				if trace != "" {
					return sandbox.Local("/", sandbox.WithEnviron(append(os.Environ(), "GIT_TRACE2_EVENT="+trace)))
				}
				return sandbox.Local("/")
			},
			manual: func(*testing.B) transport { return localPipe{} },
		},
		"remotetest": {
			runner: func(b *testing.B) sandbox.Runner {
				srv := remotetest.NewServer(b)
				return dialHost(b, srv.Addr(), srv.Config(), "/")
			},
			manual: func(b *testing.B) transport {
				srv := remotetest.NewServer(b)
				return runnerTransport{dialHost(b, srv.Addr(), srv.Config(), "/")}
			},
		},
		"sshd": {
			runner: func(b *testing.B) sandbox.Runner {
				srv := sshdtest.Start(b)
				return dialHost(b, srv.Addr(), srv.Config(), "/")
			},
			manual: func(b *testing.B) transport { return newSSHClient(b) },
		},
	}
	names := []string{"local", "remotetest", "sshd"}
	n := 0
	// sandboxDir returns a directory for one iteration's sandbox that does
	// not exist yet, and removes it once the iteration is over (timer
	// stopped).
	sandboxDir := func(b *testing.B) string {
		n++
		d := filepath.Join(base, fmt.Sprintf("sandbox%d", n))
		b.Cleanup(func() {
			if err := os.RemoveAll(d); err != nil {
				b.Errorf("removing %s: %v", d, err)
			}
		})
		return d
	}
	// loop runs one timed step per iteration, with a fresh sandbox
	// directory that is removed untimed afterwards.
	loop := func(b *testing.B, step func(remote string)) {
		for b.Loop() {
			b.StopTimer()
			remote := sandboxDir(b)
			b.StartTimer()
			step(remote)
			b.StopTimer()
			if err := os.RemoveAll(remote); err != nil {
				b.Fatal(err)
			}
			for _, tmp := range []string{remote + ".bundle", remote + ".tar"} {
				if err := os.Remove(tmp); err != nil && !os.IsNotExist(err) {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
	}
	for _, tn := range names {
		b.Run("prepare/"+tn, func(b *testing.B) {
			runner := transports[tn].runner(b)
			var snapshot, total time.Duration
			var sent int64
			loop(b, func(remote string) {
				start := time.Now()
				var shipStart time.Time
				progress := func(p sandbox.Progress) {
					if p.Asset == "prepare" && shipStart.IsZero() {
						shipStart = time.Now()
					}
					sent = p.Bytes
				}
				if _, err := workspace.Prepare(b.Context(), workspace.Spec{Local: local, Remote: remote, Runner: runner}, workspace.WithProgress(progress)); err != nil {
					b.Fatal(err)
				}
				if shipStart.IsZero() {
					b.Fatal("Prepare reported no progress of its sandbox script")
				}
				snapshot += shipStart.Sub(start)
				total += time.Since(start)
			})
			b.ReportMetric(float64(snapshot.Nanoseconds())/float64(b.N), "snapshot-ns/op")
			b.ReportMetric(float64((total-snapshot).Nanoseconds())/float64(b.N), "ship-ns/op")
			b.ReportMetric(float64(sent)/1e6, "bundle-MB")
		})
	}
	for _, tn := range names {
		b.Run("manual/"+tn, func(b *testing.B) {
			c := transports[tn].manual(b)
			loop(b, func(remote string) {
				r := shell.Quote(remote)
				c.send(b, `cd `+l+` && git bundle create -q - --all`,
					gitIsolation+`cat > `+r+`.bundle && git clone -q -b main `+r+`.bundle `+r+` && rm `+r+`.bundle`)
				c.send(b, `cd `+l+` && `+dirtyFiles+` | tar -c -f - -T -`, `cd `+r+` && tar -x -f -`)
			})
		})
	}
	for _, tn := range names {
		b.Run("manual-tar/"+tn, func(b *testing.B) {
			c := transports[tn].manual(b)
			loop(b, func(remote string) {
				r, bn := shell.Quote(remote), shell.Quote(filepath.Base(remote)+".bundle")
				c.send(b, `cd `+l+` && git bundle create -q `+r+`.bundle --all && tar -c -f - --exclude=./.git -C `+shell.Quote(base)+` `+bn+` -C `+l+` .`,
					gitIsolation+`mkdir `+r+` && cd `+r+` && tar -x -f - && git init -q -b main && git fetch -q --update-head-ok `+bn+` 'refs/heads/*:refs/heads/*' && rm `+bn+` && git read-tree HEAD && git update-index -q --refresh`)
			})
		})
	}
	b.Run("bundle/workspace", func(b *testing.B) {
		loop(b, func(string) {
			localSh(b, `cd `+l+` && echo `+snapRef+` | git bundle create -q `+x+`/b.bundle --stdin && rm `+x+`/b.bundle`, nil, nil)
		})
	})
	b.Run("bundle/manual", func(b *testing.B) {
		loop(b, func(string) {
			localSh(b, `cd `+l+` && git bundle create -q `+x+`/b.bundle --all && rm `+x+`/b.bundle`, nil, nil)
		})
	})
	b.Run("snapshot/workspace", func(b *testing.B) {
		loop(b, func(string) { localSh(b, `cd `+l+` && `+snapshotScript(xfer), nil, nil) })
	})
	b.Run("snapshot/manual", func(b *testing.B) {
		loop(b, func(string) {
			localSh(b, `cd `+l+` && `+dirtyFiles+` | tar -c -f `+x+`/s.tar -T - && rm `+x+`/s.tar`, nil, nil)
		})
	})
	b.Run("snapshot/manual-tar", func(b *testing.B) {
		loop(b, func(string) {
			localSh(b, `cd `+l+` && tar -c -f `+x+`/s.tar --exclude=./.git . && rm `+x+`/s.tar`, nil, nil)
		})
	})
	for _, tn := range names {
		b.Run("checkout/workspace/"+tn, func(b *testing.B) {
			runner := transports[tn].runner(b)
			loop(b, func(remote string) {
				in, err := os.Open(filepath.Join(xfer, "snap.bundle"))
				if err != nil {
					b.Fatal(err)
				}
				defer in.Close()
				script := shell.GitPrepareScript(shell.GitPrepare{Remote: remote, ID: "0123456789abcdef01234567", Branch: "refs/heads/main", Head: head,
					Snap: snap, Index: idxTree, TmpRef: snapRef, Bundle: true})
				var stderr strings.Builder
				env := map[string]string{"GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com", "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
				if err := runner.Run(b.Context(), sandbox.Command{Script: script, Env: env, Stdin: in, Stderr: &stderr}); err != nil {
					b.Fatalf("the prepare script in %s: %v: %s", remote, err, stderr.String())
				}
			})
		})
	}
	for _, tn := range names {
		b.Run("checkout/manual/"+tn, func(b *testing.B) {
			c := transports[tn].manual(b)
			loop(b, func(remote string) {
				r := shell.Quote(remote)
				c.send(b, `cat `+x+`/all.bundle`, gitIsolation+`cat > `+r+`.bundle && git clone -q -b main `+r+`.bundle `+r+` && rm `+r+`.bundle`)
				c.send(b, `cat `+x+`/dirty.tar`, `cd `+r+` && tar -x -f -`)
			})
		})
	}
}

// dirtyFiles lists what the manual baseline carries besides the bundle,
// as BenchmarkRoundTrip's does: the files changed, staged or untracked.
const dirtyFiles = `{ git diff --name-only; git diff --cached --name-only; git ls-files -o --exclude-standard; } | sort -u`

// snapshotScript is Prepare's host snapshot as git commands (prepareGit:
// a copy of the index that keeps its time, the index's tree, add -A of
// the work tree, its tree, the two snapshot commits), its objects written
// into a quarantine directory under tmp; it leaves the snapshot commit in
// $s and the index's tree in $i, the quarantine's objects moved into the
// repository.
func snapshotScript(tmp string) string {
	t := shell.Quote(tmp)
	return `q=$(mktemp -d ` + t + `/q.XXXXXX) && o=$PWD/.git/objects && cp -p .git/index "$q.index" &&
export GIT_INDEX_FILE="$q.index" GIT_OBJECT_DIRECTORY="$q" GIT_ALTERNATE_OBJECT_DIRECTORIES="$o" &&
git ls-files -u -z && i=$(git write-tree) &&
git add -A --ignore-errors -- . ':(exclude).airlock' ':(exclude,glob)**/.airlock-tmp-[0-9]*.[0-9]*-*' &&
w=$(git write-tree) && h=$(git rev-parse HEAD) &&
x=$(git commit-tree "$i" -p "$h" -m index) && s=$(git commit-tree "$w" -p "$h" -p "$x" -m snapshot) &&
cp -a "$q"/. "$o"/ && rm -rf "$q" "$q.index" &&
unset GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES`
}

// localPipe is the manual baseline's remote half run on this machine: a
// shell pipe.
type localPipe struct{}

func (localPipe) send(b *testing.B, local, remote string) {
	localSh(b, `{ `+local+`; } | { `+remote+`; }`, nil, nil)
}
func (localPipe) recv(b *testing.B, remote, local string) {
	localSh(b, `{ `+remote+`; } | { `+local+`; }`, nil, nil)
}
