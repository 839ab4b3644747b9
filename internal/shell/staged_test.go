package shell

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockdev/airlock/internal/tree"
)

const (
	oidA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	oidB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	zero = "0000000000000000000000000000000000000000"
	e256 = "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813"
)

// TestParseStaged: the records git diff-index writes are read into
// entries; everything that breaks the format is a protocol error that
// names what is wrong.
func TestParseStaged(t *testing.T) {
	for _, c := range []struct {
		name string
		data string
		want Staged
		err  string // a part of the error; "" when the section parses
	}{
		{name: "empty", data: ""},
		{name: "no tree", data: "U\x00", want: Staged{NoTree: true}},
		{name: "add, delete, modify, type change, sorted",
			data: ":000000 100644 " + zero + " " + oidA + " A\x00z\x00" +
				":100644 000000 " + oidA + " " + zero + " D\x00gone\x00" +
				":100644 100755 " + oidA + " " + oidA + " M\x00x\x00" +
				":100644 120000 " + oidA + " " + oidB + " T\x00l\x00",
			want: Staged{Entries: []StagedEntry{{Path: "gone"}, {Path: "l", Mode: "120000", ID: oidB}, {Path: "x", Mode: "100755", ID: oidA}, {Path: "z", Mode: "100644", ID: oidA}}}},
		{name: "intent to add",
			data: ":000000 100644 " + zero + " " + oidA + " A\x00n\x00:000000 100644 " + zero + " " + oidB + " A\x00I\x00I\x00n\x00",
			want: Staged{Entries: []StagedEntry{{Path: "I", Mode: "100644", ID: oidB}, {Path: "n", Mode: "100644", ID: oidA, IntentToAdd: true}}}},
		{name: "sha256", data: ":000000 100644 " + strings.Repeat("0", 64) + " " + e256 + " A\x00a\x00",
			want: Staged{Entries: []StagedEntry{{Path: "a", Mode: "100644", ID: e256}}}},
		{name: "submodule", data: ":000000 160000 " + zero + " " + oidA + " A\x00sub\x00",
			want: Staged{Entries: []StagedEntry{{Path: "sub", Mode: "160000", ID: oidA}}}},
		{name: "no final NUL", data: ":000000 100644 " + zero + " " + oidA + " A\x00a", err: "does not end with NUL"},
		{name: "no path", data: ":000000 100644 " + zero + " " + oidA + " A\x00", err: "has no path"},
		{name: "escaping path", data: ":000000 100644 " + zero + " " + oidA + " A\x00../x\x00", err: `"../x", not a clean relative path`},
		{name: "absolute path", data: ":000000 100644 " + zero + " " + oidA + " A\x00/etc/passwd\x00", err: "not a clean relative path"},
		{name: "unclean path", data: ":000000 100644 " + zero + " " + oidA + " A\x00a/./b\x00", err: "not a clean relative path"},
		{name: "empty path", data: ":000000 100644 " + zero + " " + oidA + " A\x00\x00", err: "not a clean relative path"},
		{name: "twice", data: ":000000 100644 " + zero + " " + oidA + " A\x00a\x00:000000 100644 " + zero + " " + oidA + " A\x00a\x00", err: "lists \"a\" twice"},
		{name: "unknown mode", data: ":000000 100664 " + zero + " " + oidA + " A\x00a\x00", err: "unknown mode"},
		{name: "tree mode", data: ":000000 040000 " + zero + " " + oidA + " A\x00a\x00", err: "unknown mode"},
		{name: "short id", data: ":000000 100644 " + zero + " aaaa A\x00a\x00", err: "object names"},
		{name: "upper-case id", data: ":000000 100644 " + zero + " " + strings.ToUpper(oidA) + " A\x00a\x00", err: "object names"},
		{name: "mixed lengths", data: ":000000 100644 " + zero + " " + e256 + " A\x00a\x00", err: "object names"},
		{name: "zero id for a present side", data: ":000000 100644 " + zero + " " + zero + " A\x00a\x00", err: "where a side is absent"},
		{name: "id for an absent side", data: ":000000 100644 " + oidB + " " + oidA + " A\x00a\x00", err: "where a side is absent"},
		{name: "status against the modes", data: ":100644 100644 " + oidB + " " + oidA + " A\x00a\x00", err: "status does not match"},
		{name: "M that changes nothing", data: ":100644 100644 " + oidA + " " + oidA + " M\x00a\x00", err: "status does not match"},
		{name: "M across types", data: ":100644 120000 " + oidB + " " + oidA + " M\x00a\x00", err: "status does not match"},
		{name: "unmerged status", data: ":100644 100644 " + oidB + " " + oidA + " U\x00a\x00", err: "status does not match"},
		{name: "rename", data: ":100644 100644 " + oidA + " " + oidA + " R100\x00a\x00b\x00", err: "status does not match"},
		{name: "extra field", data: ":000000 100644 " + zero + " " + oidA + " A x\x00a\x00", err: "want :<old mode>"},
		{name: "no colon", data: "000000 100644 " + zero + " " + oidA + " A\x00a\x00", err: "want :<old mode>"},
		{name: "U with more", data: "U\x00:000000 100644 " + zero + " " + oidA + " A\x00a\x00", err: "want :<old mode>"},
		{name: "intent list empty", data: ":000000 100644 " + zero + " " + oidA + " A\x00a\x00I\x00", err: "intent-to-add list is empty"},
		{name: "intent not listed", data: ":000000 100644 " + zero + " " + oidA + " A\x00a\x00I\x00b\x00", err: `"b" is not among`},
		{name: "intent of a deletion", data: ":100644 000000 " + oidA + " " + zero + " D\x00a\x00I\x00a\x00", err: "not in the index"},
		{name: "intent twice", data: ":000000 100644 " + zero + " " + oidA + " A\x00a\x00I\x00a\x00a\x00", err: "listed twice"},
		{name: "too long", data: strings.Repeat("x", MaxStagedBytes+1), err: "longer than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseStaged([]byte(c.data))
			if c.err != "" {
				if err == nil || !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %+v, %v; want a protocol error containing %q", got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestRestoreHeaderStaged: a git stream carries its staged section
// before the tail, and the tail names the index commit exactly when the
// section lists entries.
func TestRestoreHeaderStaged(t *testing.T) {
	st := string(StagedRecords(Staged{Entries: []StagedEntry{{Path: "a", Mode: "100644", ID: oidA}}}))
	st = fmt.Sprintf("staged %d\n%s", len(st), st)
	for _, c := range []struct {
		name, data string
		err        string
	}{
		{name: "entries and index", data: st + "bundle - " + oidA + " " + oidB + "\n"},
		{name: "no tree, no index", data: "staged 2\nU\x00bundle - " + oidA + "\n"},
		{name: "entries without index", data: st + "bundle - " + oidA + "\n", err: "does not name the index commit"},
		{name: "index without entries", data: "staged 0\nbundle - " + oidA + " " + oidB + "\n", err: "does not name the index commit"},
		{name: "bad index name", data: st + "bundle - " + oidA + " xyz\n", err: "does not name the index commit"},
		{name: "nochange after entries", data: st + "nochange\n", err: "after a staged section that lists changes"},
		{name: "nochange after no tree", data: "staged 2\nU\x00nochange\n", err: "after a staged section"},
		{name: "missing staged line", data: "nochange\n", err: `bad staged line "nochange"`},
		{name: "staged section cut", data: "staged 99\nU\x00", err: "the staged ended early"},
		{name: "staged too large", data: "staged 99999999\n", err: "bad staged line"},
		{name: "staged not canonical", data: "staged 02\nU\x00nochange\n", err: "bad staged line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := ReadRestoreHeader(bufio.NewReader(strings.NewReader("airlock-restore 1\nreport 0\n"+c.data)), true)
			if c.err != "" {
				if err == nil || !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %+v, %v; want a protocol error containing %q", h, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Tail != TailBundle || h.Snap != oidA {
				t.Fatalf("got %+v", h)
			}
		})
	}
	// A plain stream has no staged section: its line is a bad tail.
	_, err := ReadRestoreHeader(bufio.NewReader(strings.NewReader("airlock-restore 1\nreport 0\nstaged 0\ntar\n")), false)
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), `bad restore tail line "staged 0"`) {
		t.Fatalf("a plain stream with a staged line: %v", err)
	}
}

// FuzzStaged checks the staged section's parser: what it accepts holds
// only clean relative paths, each once and sorted, known modes, object
// names where an entry is in the index and none where it left it, and
// intent-to-add only on an entry in the index; written again
// (StagedRecords) it parses to the same. What it refuses is a protocol
// error. Seeds: testdata/fuzz/FuzzStaged.
func FuzzStaged(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("U\x00"))
	f.Add([]byte(":000000 100644 " + zero + " " + oidA + " A\x00n\x00:100644 000000 " + oidA + " " + zero + " D\x00d\x00I\x00n\x00"))
	f.Add([]byte(":100644 120000 " + oidA + " " + oidB + " T\x00l\x00:100644 100755 " + oidA + " " + oidA + " M\x00x\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseStaged(data)
		if err != nil {
			if !errors.Is(err, ErrProtocol) || errors.Is(err, ErrTransport) {
				t.Fatalf("a refused section is not (only) a protocol error: %v", err)
			}
			return
		}
		checkStaged(t, s)
		again := StagedRecords(s)
		s2, err := ParseStaged(again)
		if err != nil {
			t.Fatalf("re-serialized section %q does not parse: %v", again, err)
		}
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip changed the section: %+v vs %+v", s2, s)
		}
	})
}

// checkStaged fails t unless s holds only what ParseStaged may accept.
func checkStaged(t *testing.T, s Staged) {
	t.Helper()
	if s.NoTree && len(s.Entries) > 0 {
		t.Fatal("entries accepted beside an index without a tree")
	}
	if !slices.IsSortedFunc(s.Entries, func(a, b StagedEntry) int { return strings.Compare(a.Path, b.Path) }) {
		t.Fatal("entries not sorted")
	}
	for i, e := range s.Entries {
		switch {
		case !tree.ValidPath(e.Path):
			t.Fatalf("accepted path %q", e.Path)
		case i > 0 && s.Entries[i-1].Path == e.Path:
			t.Fatalf("accepted %q twice", e.Path)
		case e.Mode == "" && (e.ID != "" || e.IntentToAdd):
			t.Fatalf("a removed entry with an object or intent: %+v", e)
		case e.Mode != "" && (!slices.Contains([]string{"100644", "100755", "120000", "160000"}, e.Mode) || !IsObjectName(e.ID) || zeroID(e.ID)):
			t.Fatalf("accepted entry %+v", e)
		}
	}
}

// TestGitRestoreScriptStaged runs the restore script under each shell in
// a real repository whose index the test changed as an agent would (add,
// rm, mv, a staged hunk beside an unstaged one, add -N, a mode change, a
// link, a file under the runtime directory forced in) and reads the
// stream: the staged section lists exactly those changes, the runtime
// directory left out, and the tail names a commit of the index's tree as
// the snapshot's last parent.
func TestGitRestoreScriptStaged(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("git is not installed: %v", err)
	}
	for _, sh := range shells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := exec.LookPath(sh.argv[0]); err != nil {
				t.Skipf("%s is not installed (Debian: apt-get install dash busybox-static): %v", sh.argv[0], err)
			}
			dir := t.TempDir()
			git := func(args ...string) string {
				t.Helper()
				cmd := exec.Command("git", args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("git %v: %v: %s", args, err, out)
				}
				return strings.TrimSpace(string(out))
			}
			put := func(p, s string) {
				t.Helper()
				must(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755))
				must(t, os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644))
			}
			git("init", "-q", "-b", "main")
			put("R", "rename me\n")
			put("gone", "remove me\n")
			put("hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n")
			put("x", "run me\n")
			git("add", "-A")
			git("commit", "-q", "-m", "base")
			id := "0123456789abcdef01234567"
			git("update-ref", "refs/airlock/base/"+id+"/snap", "HEAD")
			git("update-ref", "refs/airlock/base/"+id+"/head", "HEAD")
			idx := git("rev-parse", "HEAD^{tree}")

			put("new", "added\n")
			git("add", "new")
			git("rm", "-q", "gone")
			git("mv", "R", "R2")
			put("hunks", "one\n2\n3\n4\n5\n6\n7\n8\n9\n")
			git("add", "hunks")
			put("hunks", "one\n2\n3\n4\n5\n6\n7\n8\nnine\n")
			put("ita", "intent\n")
			git("add", "-N", "ita")
			git("update-index", "--chmod=+x", "x")
			must(t, os.Symlink("x", filepath.Join(dir, "link")))
			git("add", "link")
			put(RuntimeDir+"/skill", "staged by force\n")
			git("add", "-f", RuntimeDir+"/skill")

			script := GitRestoreScript(dir, id, "t0k", idx, true, []string{"--", ".", ":(exclude)" + RuntimeDir}, nil)
			cmd := exec.Command(sh.argv[0], append(sh.argv[1:], "-c", script)...)
			cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("the script failed: %v: %s", err, stderr.String())
			}
			h, err := ReadRestoreHeader(bufio.NewReader(bytes.NewReader(out)), true)
			if err != nil {
				t.Fatal(err)
			}
			blob := func(rev string) string { t.Helper(); return git("rev-parse", rev) }
			want := []StagedEntry{
				{Path: "R"},
				{Path: "R2", Mode: "100644", ID: blob("HEAD:R")},
				{Path: "gone"},
				{Path: "hunks", Mode: "100644", ID: blob(":hunks")},
				{Path: "ita", Mode: "100644", ID: blob(":ita"), IntentToAdd: true},
				{Path: "link", Mode: "120000", ID: blob(":link")},
				{Path: "new", Mode: "100644", ID: blob(":new")},
				{Path: "x", Mode: "100755", ID: blob("HEAD:x")},
			}
			if !reflect.DeepEqual(h.Staged, Staged{Entries: want}) {
				t.Fatalf("staged section\n got %+v\nwant %+v", h.Staged, want)
			}
			if blob(":hunks") == git("hash-object", "hunks") {
				t.Fatal("the test's staged hunk is the work tree's file")
			}
			if h.Tail != TailBundle || h.Index == "" {
				t.Fatalf("tail %+v", h)
			}
			parents := strings.Fields(git("rev-list", "--parents", "-n", "1", h.Snap))
			if !reflect.DeepEqual(parents, []string{h.Snap, h.Head, h.Index}) {
				t.Fatalf("the snapshot's parents are %v, want HEAD %s and the index commit %s", parents[1:], h.Head, h.Index)
			}
			if got := git("rev-parse", h.Index+":hunks"); got != blob(":hunks") {
				t.Fatalf("the index commit holds hunks %s, want the staged %s", got, blob(":hunks"))
			}
			for _, f := range []string{"airlock-restore-" + id + ".index", "airlock-restore-" + id + ".staged", "airlock-restore-" + id + ".staged.i", "airlock-restore-" + id + ".report"} {
				if _, err := os.Lstat(filepath.Join(dir, ".git", f)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the script left .git/%s: %v", f, err)
				}
			}

			// An unmerged index: nothing is known of it, and the tail
			// names no index commit.
			cmd = exec.Command("git", "update-index", "--index-info")
			cmd.Dir = dir
			cmd.Stdin = strings.NewReader("100644 " + blob("HEAD:x") + " 2\tconflict\n100644 " + blob("HEAD:gone") + " 3\tconflict\n")
			if o, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, o)
			}
			cmd = exec.Command(sh.argv[0], append(sh.argv[1:], "-c", script)...)
			cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
			if out, err = cmd.Output(); err != nil {
				t.Fatal(err)
			}
			if h, err = ReadRestoreHeader(bufio.NewReader(bytes.NewReader(out)), true); err != nil {
				t.Fatal(err)
			}
			if !h.Staged.NoTree || h.Index != "" {
				t.Fatalf("an unmerged index came back as %+v, index %q", h.Staged, h.Index)
			}
		})
	}
}

// writeRawIndex writes a version 2 index file holding ents (mode, object
// name, path; stage 0, no stat data), sorted by path, with none of the
// checks git makes on paths: what a hostile sandbox can leave in its
// .git/index.
func writeRawIndex(t *testing.T, file string, ents [][3]string) {
	t.Helper()
	slices.SortFunc(ents, func(a, b [3]string) int { return strings.Compare(a[2], b[2]) })
	var b bytes.Buffer
	b.WriteString("DIRC")
	b.Write(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 2), uint32(len(ents))))
	for _, e := range ents {
		mode, err := strconv.ParseUint(e[0], 8, 32)
		must(t, err)
		id, err := hex.DecodeString(e[1])
		must(t, err)
		var stat [40]byte // ctime, mtime, dev, ino, mode, uid, gid, size
		binary.BigEndian.PutUint32(stat[24:], uint32(mode))
		b.Write(stat[:])
		b.Write(id)
		b.Write(binary.BigEndian.AppendUint16(nil, uint16(min(len(e[2]), 0xfff))))
		b.WriteString(e[2])
		b.Write(make([]byte, 8-(62+len(e[2]))%8)) // NUL-padded to a multiple of 8
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	must(t, os.WriteFile(file, b.Bytes(), 0o644))
}

// TestGitRestoreScriptUnreadableIndexTree: an index entry whose path is
// absolute, which git writes into the index's tree as an entry with an
// empty name that it then cannot read back. The script still sends its
// staged section, which names the path (no bare exit status), and the
// host's parser refuses it by name as a protocol error.
func TestGitRestoreScriptUnreadableIndexTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("git is not installed: %v", err)
	}
	for _, sh := range shells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := exec.LookPath(sh.argv[0]); err != nil {
				t.Skipf("%s is not installed (Debian: apt-get install dash busybox-static): %v", sh.argv[0], err)
			}
			dir := t.TempDir()
			env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
			git := func(args ...string) string {
				t.Helper()
				cmd := exec.Command("git", args...)
				cmd.Dir, cmd.Env = dir, env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("git %v: %v: %s", args, err, out)
				}
				return strings.TrimSpace(string(out))
			}
			must(t, os.WriteFile(filepath.Join(dir, "x"), []byte("x\n"), 0o644))
			git("init", "-q", "-b", "main")
			git("add", "x")
			git("commit", "-q", "-m", "base")
			id := "0123456789abcdef01234567"
			git("update-ref", "refs/airlock/base/"+id+"/snap", "HEAD")
			git("update-ref", "refs/airlock/base/"+id+"/head", "HEAD")
			idx := git("rev-parse", "HEAD^{tree}")
			x := git("rev-parse", "HEAD:x")
			writeRawIndex(t, filepath.Join(dir, ".git", "index"), [][3]string{{"100644", x, "x"}, {"100644", x, "new"}, {"100755", x, "/tmp/airlock-abs"}})
			if _, err := exec.Command("git", "-C", dir, "diff-index", "--cached", "--name-only", git("write-tree")).CombinedOutput(); err == nil {
				t.Fatal("git reads back the tree of an index with an absolute path: the test no longer plays the case")
			}

			script := GitRestoreScript(dir, id, "t0k", idx, true, []string{"--", ".", ":(exclude)" + RuntimeDir}, nil)
			cmd := exec.Command(sh.argv[0], append(sh.argv[1:], "-c", script)...)
			cmd.Env = env
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, runErr := cmd.Output() // the header is judged whatever the bundle after it did: the host stops reading there
			_, err := ReadRestoreHeader(bufio.NewReader(bytes.NewReader(out)), true)
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), `"/tmp/airlock-abs", not a clean relative path`) {
				t.Fatalf("got %v (the script: %v, stderr %q), want the protocol error naming /tmp/airlock-abs", err, runErr, stderr.String())
			}
			if _, err := os.Lstat("/tmp/airlock-abs"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("/tmp/airlock-abs: %v", err)
			}
		})
	}
}
