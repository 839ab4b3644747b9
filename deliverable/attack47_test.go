package deliverable_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/deliverable/mcptool"
	"github.com/airlockdev/airlock/sandbox"
)

// a47Child names the part a re-executed test binary plays.
const a47Child = "AIRLOCK_A47_CHILD"

// a47Store opens a FileStore in a fresh directory of the host's disk.
func a47Store(t *testing.T) (*deliverable.FileStore, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "st")
	st, err := deliverable.OpenFileStore(dir)
	require.NoError(t, err)
	return st, dir
}

// Finding 1: one attachment covered two requested files of one base name.
func TestAttack47SameBaseNameNeedsItsOwnAttachment(t *testing.T) {
	ctx := t.Context()
	st, _ := a47Store(t)
	tasks := st.Tasks()
	reg := &deliverable.Registrar{Store: st}
	require.NoError(t, tasks.Put(ctx, deliverable.TaskRecord{ID: "T", Objective: "Deliverables:\n- en/report.pdf\n- de/report.pdf\n"}))
	ws := t.TempDir()
	data := []byte("%PDF english only")
	writeFile(t, ws, "en/report.pdf", data)
	en, err := reg.Register(ctx, local(t, ws), "T", "R", requestFor("en/report.pdf", "k1", data))
	require.NoError(t, err)
	// Registering the same file again under a new key is the same file.
	again, err := reg.Register(ctx, local(t, ws), "T", "R", requestFor("en/report.pdf", "k2", data))
	require.NoError(t, err)
	require.Equal(t, deliverable.Duplicate, again.Disposition)

	err = tasks.Complete(ctx, deliverable.Evidence{TaskID: "T", RunID: "R", Refs: []string{"deliverable:" + en.AttachmentID, "deliverable:" + again.AttachmentID}})
	var ee *deliverable.EvidenceError
	require.ErrorAs(t, err, &ee, "two requested files accepted with one attachment")
	assert.Equal(t, []string{"de/report.pdf"}, ee.Missing, "the one not registered is named")
	assert.Equal(t, "The task asks for de/report.pdf, but the completion cites no attachment registered for it on this task in run R; "+
		"a child task's file does not count. Use register_deliverable for de/report.pdf and cite deliverable:<attachmentId> from its receipt. "+
		"Each requested file needs its own attachment: the one cited under that name covers another requested file.", ee.Message)
	rec, err := tasks.Record(ctx, "T")
	require.NoError(t, err)
	assert.Equal(t, deliverable.StatusTodo, rec.Status)

	// The German file, with the same bytes, is its own attachment.
	writeFile(t, ws, "de/report.pdf", data)
	de, err := reg.Register(ctx, local(t, ws), "T", "R", requestFor("de/report.pdf", "k3", data))
	require.NoError(t, err)
	assert.Equal(t, deliverable.Applied, de.Disposition)
	assert.NotEqual(t, en.AttachmentID, de.AttachmentID)
	require.NoError(t, tasks.Complete(ctx, deliverable.Evidence{TaskID: "T", RunID: "R", Refs: []string{"deliverable:" + en.AttachmentID, "deliverable:" + de.AttachmentID}}))
}

// The matching of requested files to attachments, through ValidateEvidence
// over a host's Tasks (whose attachments may not know their contentRef).
func TestAttack47MatchingTable(t *testing.T) {
	att := func(id, name, ref string) deliverable.Attachment {
		return deliverable.Attachment{ID: id, TaskID: "T", RunID: "R", Filename: name, ContentRef: ref, ContentType: "application/pdf", SHA256: strings.Repeat("a", 64), ByteSize: 1, Title: "x"}
	}
	ids := []string{"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002", "00000000-0000-4000-8000-000000000003"}
	cases := []struct {
		name    string
		obj     string
		atts    []deliverable.Attachment
		missing []string // nil: accepted
	}{
		{"one attachment, two requested paths", "Deliverables:\n- en/report.pdf\n- de/report.pdf", []deliverable.Attachment{att(ids[0], "report.pdf", "en/report.pdf")}, []string{"de/report.pdf"}},
		{"the path registered is preferred when naming the missing one", "Deliverables:\n- de/report.pdf\n- en/report.pdf", []deliverable.Attachment{att(ids[0], "report.pdf", "en/report.pdf")}, []string{"de/report.pdf"}},
		{"two attachments without a path (another Store)", "Deliverables:\n- en/report.pdf\n- de/report.pdf", []deliverable.Attachment{att(ids[0], "report.pdf", ""), att(ids[1], "report.pdf", "")}, nil},
		{"one attachment without a path: the first requested gets it", "Deliverables:\n- en/report.pdf\n- de/report.pdf", []deliverable.Attachment{att(ids[0], "report.pdf", "")}, []string{"en/report.pdf"}},
		{"one path registered twice is one file", "Deliverables:\n- en/report.pdf\n- de/report.pdf", []deliverable.Attachment{att(ids[0], "report.pdf", "en/report.pdf"), att(ids[1], "report.pdf", "en/report.pdf")}, []string{"de/report.pdf"}},
		{"the base-name rule holds: another directory covers it", "Deliverables:\n- dist/index.html", []deliverable.Attachment{att(ids[0], "index.html", "build/index.html")}, nil},
		{"a requested path ending another one names the same file", "Write en/report.pdf.\n\nDeliverables:\n- report.pdf\n- en/report.pdf", []deliverable.Attachment{att(ids[0], "report.pdf", "en/report.pdf")}, nil},
		{"three paths, two registered, one elsewhere", "Deliverables:\n- a/x.pdf\n- b/x.pdf\n- c/x.pdf", []deliverable.Attachment{att(ids[0], "x.pdf", "c/x.pdf"), att(ids[1], "x.pdf", "out/x.pdf")}, []string{"b/x.pdf"}},
		{"different base names do not compete", "Deliverables:\n- a/x.pdf\n- b/y.pdf", []deliverable.Attachment{att(ids[0], "x.pdf", "a/x.pdf"), att(ids[1], "y.pdf", "z/y.pdf")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemTasks()
			m.addTask("T", "", deliverable.StatusInProgress)
			var refs []string
			for _, a := range tc.atts {
				m.addAttachment(a)
				refs = append(refs, "deliverable:"+a.ID)
			}
			err := deliverable.ValidateEvidence(t.Context(), m, deliverable.Evidence{TaskID: "T", RunID: "R", Objective: tc.obj, Refs: refs})
			if tc.missing == nil {
				require.NoError(t, err)
				return
			}
			var ee *deliverable.EvidenceError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, tc.missing, ee.Missing)
		})
	}
}

// Finding 2: a sentence-initial "instead" or "rather" before the
// imperative, without a comma, read as a negation.
func TestAttack47DiscourseOpeners(t *testing.T) {
	for _, tc := range []struct {
		obj   string
		file  bool
		files []string
	}{
		{"Instead attach summary.pdf.", true, []string{"summary.pdf"}},
		{"Do not create report.pdf; instead attach summary.pdf.", true, []string{"summary.pdf"}},
		{"Don't email the numbers. Instead attach them as numbers.csv.", true, []string{"numbers.csv"}},
		{"Rather attach summary.pdf.", true, []string{"summary.pdf"}},
		{"Please instead attach summary.pdf.", true, []string{"summary.pdf"}},
		{"Then instead export the table as table.xlsx.", true, []string{"table.xlsx"}},
		{"Instead save the results as out.json.", true, []string{"out.json"}},
		{"Instead, attach summary.pdf.", true, []string{"summary.pdf"}},
		{"Attach summary.pdf instead.", true, []string{"summary.pdf"}},
		// A linked instead-word still negates, and so does "without".
		{"Instead of attaching summary.pdf, paste it inline.", false, nil},
		{"Rather than attach summary.pdf, reply in chat.", false, nil},
		{"Without attaching summary.pdf, reply in chat.", false, nil},
		{"Reply in chat instead of attaching report.pdf.", false, nil},
		{"Instead, do not attach report.pdf.", false, nil},
		{"I'd rather not attach report.pdf; reply in chat.", false, nil},
	} {
		got := deliverable.DetectRequests(tc.obj)
		assert.Equal(t, tc.file, got.File, "%q", tc.obj)
		assert.Equal(t, tc.files, got.Files, "%q", tc.obj)
	}
}

// The property behind it: a discourse word before an imperative asks what
// the imperative alone asks, with or without a comma.
func TestAttack47DiscourseOpenersProperty(t *testing.T) {
	openers := []string{"Instead", "Rather", "Also", "Then", "Please", "Finally", "Now", "Just", "Additionally",
		"Next", "Afterwards", "So", "Lastly", "Alternatively", "Otherwise", "Optionally", "Separately", "Once done", "After that"}
	sentences := []string{"attach summary.pdf.", "export the table as numbers.csv.", "save the results as out.json.",
		"send me the report as report.docx.", "write the findings to findings.md.", "make the chart downloadable as chart.png."}
	for _, s := range sentences {
		want := deliverable.DetectRequests(strings.ToUpper(s[:1]) + s[1:])
		require.True(t, want.File, "the base case %q asks for a file", s)
		for _, o := range openers {
			for _, sep := range []string{" ", ", "} {
				for _, before := range []string{"", "Do not create report.txt. ", "Don't email it; "} {
					obj := before + o + sep + s
					got := deliverable.DetectRequests(obj)
					assert.Equal(t, want.Files, got.Files, "%q", obj)
					assert.True(t, got.File, "%q", obj)
				}
			}
		}
	}
}

// Finding 3: a local workspace root removed or renamed away is the host's
// failure, not the agent's missing file.
func TestAttack47LocalRootGone(t *testing.T) {
	for _, how := range []string{"removed", "renamed away", "replaced by a file"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t)
			root := filepath.Join(t.TempDir(), "ws")
			data := []byte("a,b\n")
			writeFile(t, root, "r.csv", data)
			ws := local(t, root)
			switch how {
			case "removed":
				require.NoError(t, os.RemoveAll(root))
			case "renamed away":
				require.NoError(t, os.Rename(root, root+".old"))
			default:
				require.NoError(t, os.RemoveAll(root))
				require.NoError(t, os.WriteFile(root, []byte("x"), 0o600))
			}
			_, err := f.reg.Register(t.Context(), ws, "t", "r", requestFor("r.csv", "k", data))
			he := requireHostError(t, err)
			assert.Equal(t, "read workspace", he.Op)
			assert.ErrorContains(t, err, "deliverable: read workspace: the local workspace root "+root+" is no longer a directory")
			assert.ErrorContains(t, err, "restore it, or pass LocalWorkspace the workspace's current directory")
			assert.NotErrorIs(t, err, fs.ErrNotExist)
			assert.False(t, sandbox.Retryable(err))
			assert.Empty(t, filesUnder(t, f.fs, f.dir, "attachments"))

			// Over MCP the agent gets the host-failure message, not "write the file first".
			cs := a47Client(t, mcptool.New(f.reg, ws, "t", "r"))
			text, isErr := a47Call(t, cs, requestFor("r.csv", "k", data))
			assert.True(t, isErr)
			assert.Equal(t, "register_deliverable: the registration failed on the host's side, not because of your request. "+
				"Wait a little and call register_deliverable again with the same arguments and the same idempotencyKey; "+
				"if it keeps failing, say in your report that the file could not be registered.", text)
		})
	}
	// A file missing in a root that is there is still the agent's.
	f := newFixture(t)
	_, err := f.reg.Register(t.Context(), local(t, f.ws), "t", "r", requestFor("none.csv", "k", []byte("x")))
	var re *deliverable.RequestError
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func a47Client(t *testing.T, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "test"}, nil).Connect(t.Context(), ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func a47Call(t *testing.T, cs *mcp.ClientSession, req deliverable.Request) (string, bool) {
	t.Helper()
	var args map[string]any
	data, err := json.Marshal(req)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &args))
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: deliverable.DefaultToolName, Arguments: args})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// Finding 4: a blob damaged on disk was reused for a new, verified Put.
func TestAttack47DamagedBlobIsReplaced(t *testing.T) {
	ctx := t.Context()
	st, dir := a47Store(t)
	reg := &deliverable.Registrar{Store: st}
	ws := t.TempDir()
	data := []byte("verified bytes, every one of them")
	writeFile(t, ws, "r.csv", data)
	blob := filepath.Join(dir, "blobs", sum(data))
	flip := func() {
		t.Helper()
		b, err := os.ReadFile(blob)
		require.NoError(t, err)
		b[3] ^= 0x20
		require.NoError(t, os.WriteFile(blob, b, 0o600))
	}
	read := func(id string) []byte {
		t.Helper()
		_, rc, err := st.Open(ctx, id)
		require.NoError(t, err)
		defer rc.Close()
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		return b
	}
	_, err := reg.Register(ctx, local(t, ws), "T1", "R", requestFor("r.csv", "k", data))
	require.NoError(t, err)

	flip()
	applied, err := reg.Register(ctx, local(t, ws), "T2", "R", requestFor("r.csv", "k", data))
	require.NoError(t, err)
	require.Equal(t, deliverable.Applied, applied.Disposition)
	assert.Equal(t, data, read(applied.AttachmentID), "an applied receipt serves the verified bytes")

	flip()
	dup, err := reg.Register(ctx, local(t, ws), "T2", "R", requestFor("r.csv", "k2", data))
	require.NoError(t, err)
	require.Equal(t, deliverable.Duplicate, dup.Disposition)
	assert.Equal(t, data, read(dup.AttachmentID), "a duplicate receipt serves the verified bytes")
	assert.Empty(t, a47Names(t, filepath.Join(dir, "tmp")))
}

func a47Names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// hangingReader yields half of data, says so, then blocks until release
// is closed (or forever).
type hangingReader struct {
	data    []byte
	n       int
	ready   func()
	release chan struct{}
}

func (h *hangingReader) Read(p []byte) (int, error) {
	if h.n < len(h.data)/2 {
		k := copy(p, h.data[h.n:len(h.data)/2])
		h.n += k
		return k, nil
	}
	if h.ready != nil {
		h.ready()
		h.ready = nil
		<-h.release
	}
	if h.n == len(h.data) {
		return 0, io.EOF
	}
	k := copy(p, h.data[h.n:])
	h.n += k
	return k, nil
}

// Finding 5: a writer killed mid-Put left its temporary blob forever.
func TestAttack47SweepsADeadWritersTemporaryFiles(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	if os.Getenv(a47Child) == "hang" {
		st, err := deliverable.OpenFileStore(os.Getenv("AIRLOCK_A47_DIR"))
		require.NoError(t, err)
		h := &hangingReader{data: data, ready: func() {
			require.NoError(t, os.WriteFile(os.Getenv("AIRLOCK_A47_READY"), nil, 0o600))
		}, release: make(chan struct{})}
		_, _ = st.Put(t.Context(), entryFor("t", "r", "k", data), deliverable.NewContent(h, int64(len(data)), sum(data)))
		t.Fatal("the Put ended; it should have been killed")
	}
	st, dir := a47Store(t)
	tmp := filepath.Join(dir, "tmp")
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttack47SweepsADeadWritersTemporaryFiles$", "-test.count=1")
	cmd.Env = append(os.Environ(), a47Child+"=hang", "AIRLOCK_A47_DIR="+dir, "AIRLOCK_A47_READY="+ready)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	a47WaitFor(t, ready, &out)
	require.NoError(t, cmd.Process.Kill()) // SIGKILL: no deferred cleanup runs
	_ = cmd.Wait()
	left := a47Names(t, tmp)
	require.Len(t, left, 1, "the killed writer's temporary blob")
	require.True(t, strings.HasPrefix(left[0], "blob-"), left[0])

	// Files that are not the store's, or are an earlier version's and
	// recent, stay; an earlier version's a day old goes.
	keep := []string{"notes.txt", "blob-", "blob-x1", ".new-SHORT", "blob-123", ".a.json.tmp-" + strings.Repeat("A", 26)}
	for _, n := range keep {
		require.NoError(t, os.WriteFile(filepath.Join(tmp, n), []byte("x"), 0o600))
	}
	old := []string{"blob-4294967295", ".b.json.tmp-" + strings.Repeat("B", 26), ".new-" + strings.Repeat("C", 16)}
	for _, n := range old {
		p := filepath.Join(tmp, n)
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
		day := time.Now().Add(-25 * time.Hour)
		require.NoError(t, os.Chtimes(p, day, day))
	}

	// A live writer in this process: its temporary file survives a sweep.
	release := make(chan struct{})
	live := make(chan struct{})
	h := &hangingReader{data: data, ready: func() { close(live) }, release: release}
	done := make(chan error, 1)
	go func() {
		_, err := st.Put(context.Background(), entryFor("t", "r", "live", data), deliverable.NewContent(h, int64(len(data)), sum(data)))
		done <- err
	}()
	<-live
	again, err := deliverable.OpenFileStore(dir) // sweeps
	require.NoError(t, err)
	after := a47Names(t, tmp)
	assert.NotContains(t, after, left[0], "the dead writer's file is swept")
	for _, n := range old {
		assert.NotContains(t, after, n, "a day-old temporary file of an earlier version is swept")
	}
	slices.Sort(keep)
	var rest []string
	for _, n := range after {
		if !slices.Contains(keep, n) {
			rest = append(rest, n)
		}
	}
	assert.Len(t, rest, 1, "the live writer's file stays: %v", after)
	for _, n := range keep {
		assert.Contains(t, after, n)
	}
	close(release)
	require.NoError(t, <-done)
	rc, _, err := again.Lookup(t.Context(), deliverable.Key{TaskID: "t", RunID: "r", IdempotencyKey: "live"})
	require.NoError(t, err)
	_, content, err := again.Open(t.Context(), rc.AttachmentID)
	require.NoError(t, err)
	got, err := io.ReadAll(content)
	require.NoError(t, content.Close())
	require.NoError(t, err)
	assert.Equal(t, data, got)
}

// a47WaitFor waits for the file name to exist, for up to a minute.
func a47WaitFor(t *testing.T, name string, out *bytes.Buffer) {
	t.Helper()
	for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(name); err == nil {
			return
		}
	}
	t.Fatalf("%s did not appear; the child said:\n%s", name, out)
}

// Finding 6: two processes on one store directory lost each other's
// receipts.
func TestAttack47TwoProcessesShareOneStore(t *testing.T) {
	const keys = 40
	if os.Getenv(a47Child) == "register" {
		a47RegisterChild(t, keys)
		return
	}
	_, dir := a47Store(t)
	start := filepath.Join(t.TempDir(), "go")
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for p := range 2 {
		ws := t.TempDir()
		for j := range keys {
			writeFile(t, ws, fmt.Sprintf("f%d.csv", j), []byte(fmt.Sprintf("process %d row %d\n", p, j)))
		}
		ready := filepath.Join(t.TempDir(), "ready")
		cmd := exec.Command(os.Args[0], "-test.run=^TestAttack47TwoProcessesShareOneStore$", "-test.count=1")
		cmd.Env = append(os.Environ(), a47Child+"=register", "AIRLOCK_A47_DIR="+dir, "AIRLOCK_A47_WS="+ws,
			"AIRLOCK_A47_P="+strconv.Itoa(p), "AIRLOCK_A47_READY="+ready, "AIRLOCK_A47_GO="+start)
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		a47WaitFor(t, ready, out)
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	require.NoError(t, os.WriteFile(start, nil, 0o600))
	for i, cmd := range cmds {
		require.NoError(t, cmd.Wait(), "child %d:\n%s", i, outs[i])
	}

	st, err := deliverable.OpenFileStore(dir)
	require.NoError(t, err)
	lost := 0
	for p := range 2 {
		for j := range keys {
			rc, _, err := st.Lookup(t.Context(), deliverable.Key{TaskID: "T", RunID: "R", IdempotencyKey: fmt.Sprintf("p%d-k%d", p, j)})
			if err != nil {
				lost++
				continue
			}
			_, content, err := st.Open(t.Context(), rc.AttachmentID)
			require.NoError(t, err)
			got, err := io.ReadAll(content)
			require.NoError(t, content.Close())
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("process %d row %d\n", p, j), string(got))
		}
	}
	assert.Zero(t, lost, "receipts lost of %d", 2*keys)
}

func a47RegisterChild(t *testing.T, keys int) {
	st, err := deliverable.OpenFileStore(os.Getenv("AIRLOCK_A47_DIR"))
	require.NoError(t, err)
	reg := &deliverable.Registrar{Store: st}
	ws := local(t, os.Getenv("AIRLOCK_A47_WS"))
	p := os.Getenv("AIRLOCK_A47_P")
	require.NoError(t, os.WriteFile(os.Getenv("AIRLOCK_A47_READY"), nil, 0o600))
	for {
		if _, err := os.Stat(os.Getenv("AIRLOCK_A47_GO")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for j := range keys {
		data := []byte(fmt.Sprintf("process %s row %d\n", p, j))
		_, err := reg.Register(t.Context(), ws, "T", "R", requestFor(fmt.Sprintf("f%d.csv", j), fmt.Sprintf("p%s-k%d", p, j), data))
		require.NoError(t, err)
	}
}

// Also the tasks: while another process checks a task's evidence (holds
// FileTasks.Lock), its status cannot change here.
func TestAttack47TaskLockHoldsAcrossProcesses(t *testing.T) {
	if os.Getenv(a47Child) == "hold" {
		st, err := deliverable.OpenFileStore(os.Getenv("AIRLOCK_A47_DIR"))
		require.NoError(t, err)
		unlock, err := st.Tasks().Lock(t.Context(), []string{"T"}, nil)
		require.NoError(t, err)
		defer unlock()
		require.NoError(t, os.WriteFile(os.Getenv("AIRLOCK_A47_READY"), nil, 0o600))
		for { // held until this process is killed
			time.Sleep(time.Second)
		}
	}
	st, dir := a47Store(t)
	tasks := st.Tasks()
	require.NoError(t, tasks.Put(t.Context(), deliverable.TaskRecord{ID: "T", Status: deliverable.StatusDone}))
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttack47TaskLockHoldsAcrossProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), a47Child+"=hold", "AIRLOCK_A47_DIR="+dir, "AIRLOCK_A47_READY="+ready)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	a47WaitFor(t, ready, &out)

	short, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, tasks.SetStatus(short, "T", deliverable.StatusInProgress), context.DeadlineExceeded, "the status changed under another process's lock")
	require.NoError(t, cmd.Process.Kill()) // the kernel drops a dead holder's lock
	_ = cmd.Wait()
	require.NoError(t, tasks.SetStatus(t.Context(), "T", deliverable.StatusInProgress))
	task, err := tasks.Task(t.Context(), "T")
	require.NoError(t, err)
	assert.Equal(t, deliverable.StatusInProgress, task.Status)
}

// enospcFs fails writes to temporary blobs with a full disk.
type enospcFs struct{ afero.Fs }

func (f enospcFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	file, err := f.Fs.OpenFile(name, flag, perm)
	if err != nil || !strings.Contains(name, "/tmp/blob-") {
		return file, err
	}
	return enospcFile{file}, nil
}

type enospcFile struct{ afero.File }

func (f enospcFile) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
}

// Finding 7: a full disk said its cause twice prefixed and no next step.
func TestAttack47FullDiskSaysWhatToDo(t *testing.T) {
	fsys := enospcFs{afero.NewMemMapFs()}
	st, err := deliverable.NewFileStore(fsys, "/store")
	require.NoError(t, err)
	ws := t.TempDir()
	data := []byte("a,b\n")
	writeFile(t, ws, "r.csv", data)
	_, err = (&deliverable.Registrar{Store: st}).Register(t.Context(), local(t, ws), "t", "r", requestFor("r.csv", "k", data))
	he := requireHostError(t, err)
	assert.Equal(t, "store", he.Op)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	msg := err.Error()
	assert.Equal(t, 1, strings.Count(msg, "deliverable: "), msg)
	assert.True(t, strings.HasPrefix(msg, "deliverable: store: write temporary blob /store/tmp/blob-"), msg)
	assert.True(t, strings.HasSuffix(msg, ": no space left on device; the file system of the store /store is full: "+
		"free space (or inodes) on it, then retry: the same call succeeds once there is room"), msg)
	assert.False(t, sandbox.Retryable(err), "a full disk clears only when someone frees space (sandbox.Retryable)")
	assert.Empty(t, filesUnder(t, fsys, "/store", "tmp"))

	// A HostError says "deliverable: " once whatever its cause says.
	assert.Equal(t, "deliverable: store: boom", (&deliverable.HostError{Op: "store", Err: errors.New("deliverable: boom")}).Error())
}

// Finding 8: invisible format and separator characters, and a contentRef
// that is not exactly the file's path.
func TestAttack47InvisibleCharactersAreRefused(t *testing.T) {
	f := newFixture(t)
	data := []byte("a,b\n")
	writeFile(t, f.ws, "r.csv", data)
	ws := local(t, f.ws)
	try := func(mutate func(*deliverable.Request)) (*deliverable.RequestError, error) {
		req := requestFor("r.csv", "k", data)
		mutate(&req)
		_, err := f.reg.Register(t.Context(), ws, "t", "r", req)
		var re *deliverable.RequestError
		if errors.As(err, &re) {
			return re, err
		}
		return nil, err
	}
	for _, r := range []rune{0x2028, 0x2029, 0x200B, 0x200C, 0x200D, 0xFEFF, 0x00AD, 0xFFF9, 0x202E, 0x061C, 0x2066, 0xE0001} {
		for _, field := range []string{"filename", "title", "idempotencyKey"} {
			if field == "title" && (r == 0x200C || r == 0x200D) {
				continue // prose needs the joiners: below
			}
			re, err := try(func(q *deliverable.Request) {
				switch field {
				case "filename":
					q.Filename = "r" + string(r) + ".csv"
				case "title":
					q.Title = "Res" + string(r) + "ults"
				default:
					q.IdempotencyKey = "k" + string(r) + "1"
				}
			})
			require.NotNil(t, re, "%U in %s: %v", r, field, err)
			assert.ErrorIs(t, err, deliverable.ErrInvalidRequest)
			assert.Equal(t, field, re.Field)
			assert.Contains(t, re.Message, fmt.Sprintf("contains the invisible character %U; remove it.", r))
		}
		re, err := try(func(q *deliverable.Request) { q.ContentRef = "out" + string(r) + "/r.csv" })
		require.NotNil(t, re, "%U in contentRef: %v", r, err)
		assert.ErrorIs(t, err, deliverable.ErrPathDenied)
		assert.Contains(t, re.Message, fmt.Sprintf("contains the invisible character %U;", r))
	}
	// A title may hold the joiners, as prose in Persian or an emoji
	// sequence does; a file name may not.
	for i, title := range []string{"گزارش می\u200cخواهم", "👩\u200D💻 report"} {
		re, err := try(func(q *deliverable.Request) { q.Title = title; q.IdempotencyKey = fmt.Sprint("k-", i) })
		require.Nil(t, re, "title %q: %v", title, err)
		require.NoError(t, err)
	}
	// Every other format and separator character, in the title.
	for _, tab := range []*unicode.RangeTable{unicode.Cf, unicode.Zl, unicode.Zp} {
		for _, rg := range tab.R16 {
			for r := rune(rg.Lo); r <= rune(rg.Hi); r += rune(rg.Stride) {
				if r == 0x200C || r == 0x200D {
					continue
				}
				re, _ := try(func(q *deliverable.Request) { q.Title = "a" + string(r) + "b" })
				assert.NotNil(t, re, "%U", r)
			}
		}
		for _, rg := range tab.R32 {
			for r := rune(rg.Lo); r <= rune(rg.Hi); r += rune(rg.Stride) {
				re, _ := try(func(q *deliverable.Request) { q.Title = "a" + string(r) + "b" })
				assert.NotNil(t, re, "%U", r)
			}
		}
	}
	for _, tc := range []struct{ ref, msg string }{
		{" r.csv", `register_deliverable: contentRef " r.csv" has white space at its start or end; pass the path exactly as the file is named, with nothing around it.`},
		{"r.csv ", `register_deliverable: contentRef "r.csv " has white space at its start or end; pass the path exactly as the file is named, with nothing around it.`},
		{"r.csv\u00a0", `register_deliverable: contentRef "r.csv\u00a0" has white space at its start or end; pass the path exactly as the file is named, with nothing around it.`},
		{"r.csv/", `register_deliverable: contentRef "r.csv/" ends with "/", so it names a directory; pass the file's path without a "/" at its end.`},
		{"r.csv/.", `register_deliverable: contentRef "r.csv/." ends with "/", so it names a directory; pass the file's path without a "/" at its end.`},
		{"   ", `register_deliverable: contentRef "   " is empty; pass the file's path relative to the workspace root, such as "out/report.pdf".`},
	} {
		re, err := try(func(q *deliverable.Request) { q.ContentRef = tc.ref })
		require.NotNil(t, re, "%q: %v", tc.ref, err)
		assert.ErrorIs(t, err, deliverable.ErrPathDenied)
		assert.Equal(t, "contentRef", re.Field)
		assert.Equal(t, tc.msg, re.Message)
		assertAgentMessage(t, re.Message, deliverable.DefaultToolName)
	}
	assert.Len(t, filesUnder(t, f.fs, f.dir, "attachments"), 1, "only the file registered under the joiners' titles was stored")
	// The same file spelled otherwise is that file.
	rc, err := f.reg.Register(t.Context(), ws, "t", "r", requestFor("./r.csv", "k", data))
	require.NoError(t, err)
	assert.Equal(t, "r.csv", rc.Filename)
}

// Finding 9: a conflict says what differs from the request that first
// used the key.
func TestAttack47ConflictSaysWhatDiffers(t *testing.T) {
	f := newFixture(t)
	data := []byte("v1")
	writeFile(t, f.ws, "v.txt", data)
	writeFile(t, f.ws, "copy/v.txt", data)
	writeFile(t, f.ws, "w.txt", []byte("v2"))
	ws := local(t, f.ws)
	first, err := f.reg.Register(t.Context(), ws, "t", "r", requestFor("v.txt", "key", data))
	require.NoError(t, err)
	dup, err := f.reg.Register(t.Context(), ws, "t", "r", requestFor("v.txt", "dup", data))
	require.NoError(t, err)
	require.Equal(t, deliverable.Duplicate, dup.Disposition)
	id := first.AttachmentID
	used := func(key string) string {
		return `register_deliverable: idempotencyKey "` + key + `" was already used in this run for attachment ` + id + ` (v.txt); `
	}
	for _, tc := range []struct {
		name   string
		key    string
		mutate func(*deliverable.Request)
		msg    string
	}{
		{"title", "key", func(r *deliverable.Request) { r.Title = "Other" },
			used("key") + `this request differs only in its title ("Results" then, "Other" now): the file is the same; it is already delivered: cite deliverable:` + id +
				` (it keeps its first title, "Results", and contentType), or call again with that request's arguments to get its receipt.`},
		{"contentType", "key", func(r *deliverable.Request) { r.ContentType = "text/plain" },
			used("key") + `this request differs only in its contentType ("text/csv" then, "text/plain" now): the file is the same; it is already delivered: cite deliverable:` + id +
				` (it keeps its first title, "Results", and contentType), or call again with that request's arguments to get its receipt.`},
		{"contentRef", "key", func(r *deliverable.Request) { r.ContentRef = "copy/v.txt" },
			used("key") + `this request differs in its contentRef ("v.txt" then, "copy/v.txt" now); use a new idempotencyKey for a different file, or that request's arguments to get its receipt.`},
		{"bytes", "key", func(r *deliverable.Request) { *r = requestFor("w.txt", "key", []byte("v2")); r.Filename = "w.txt" },
			used("key") + `this request differs in its filename ("v.txt" then, "w.txt" now), sha256, contentRef ("v.txt" then, "w.txt" now); use a new idempotencyKey for a different file, or that request's arguments to get its receipt.`},
		{"a duplicate's key: title or path unknown", "dup", func(r *deliverable.Request) { r.Title = "Other" },
			used("dup") + `this request has the same bytes and filename but differs in its title or contentRef; if it is the same file it is already delivered: cite deliverable:` + id + `; for another file use a new idempotencyKey.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := requestFor("v.txt", tc.key, data)
			tc.mutate(&req)
			_, err := f.reg.Register(t.Context(), ws, "t", "r", req)
			require.ErrorIs(t, err, deliverable.ErrIdempotencyConflict)
			var re *deliverable.RequestError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, "idempotencyKey", re.Field)
			assert.Equal(t, tc.msg, re.Message)
			assertAgentMessage(t, re.Message, deliverable.DefaultToolName)
		})
	}
}
