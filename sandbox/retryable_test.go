package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/afero"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/deliverable"
	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/session"
	"github.com/airlockdev/airlock/skills"
	"github.com/airlockdev/airlock/stage"
	"github.com/airlockdev/airlock/stage/remote"
	"github.com/airlockdev/airlock/workspace"
)

// answer is one error and what sandbox.Retryable must say of it.
type answer struct {
	err  error
	want bool
}

// answers lists every exported sentinel (Err…) and error type (…Error) of
// the module's library packages, keyed "<package directory>.<Name>", with
// the errors built from it that airlock returns and sandbox.Retryable's
// answer for each. TestRetryableCoversEveryError fails when a package
// declares one that is not here: decide its answer, and give it a Retryable
// method (or make the sentinel with internal/sentinel) when the default is
// wrong.
var answers = map[string][]answer{
	// sandbox: the vocabulary.
	"sandbox.ErrTransport": {{sandbox.ErrTransport, true}, {fmt.Errorf("%w: ssh: connection lost", sandbox.ErrTransport), true}},
	"sandbox.ErrProtocol": {{sandbox.ErrProtocol, false},
		{errors.Join(sandbox.ErrProtocol, sandbox.ErrTransport), false}}, // the hostile reply decides, not the cut after it
	"sandbox.ErrLimit":      {{sandbox.ErrLimit, false}},
	"sandbox.ErrBadCommand": {{sandbox.ErrBadCommand, false}, {sandbox.CheckEnv(map[string]string{"A-B": "x"}), false}},
	// A stopped command's outcome is unknown: a transport failure.
	"sandbox.StopError": {{&sandbox.StopError{Err: context.Canceled, Detail: "the kill exec failed"}, true}, {&sandbox.StopError{Verified: true, Err: io.ErrUnexpectedEOF}, true},
		{&sandbox.StopError{Err: context.Canceled, KillErr: fmt.Errorf("%w: the kill call failed: exit status 7", sandbox.ErrTransport)}, true},
		// the sandbox answered the kill call with garbage: its broken protocol decides
		{&sandbox.StopError{Err: context.Canceled, KillErr: fmt.Errorf("%w: the answer to the kill call does not parse", sandbox.ErrProtocol)}, false}},
	"sandbox.ExitError": {{&sandbox.ExitError{Status: 1}, false}, {&sandbox.ExitError{Status: -1, Signal: "KILL"}, false}},

	// stage.
	"stage.ErrBadAsset": {{stage.ErrBadAsset, false}},
	"stage.ErrBadRoot":  {{stage.ErrBadRoot, false}},
	//lint:ignore SA1019 the deprecated alias keeps its answer for its release
	"stage.ErrTransport": {{stage.ErrTransport, true}},
	"stage.ErrTool":      {{stage.ErrTool, false}, {fmt.Errorf("%w: the sandbox lacks tar", stage.ErrTool), false}}, // install it in the image
	"stage.ErrMismatch":  {{stage.ErrMismatch, false}},
	"stage.ErrNoContent": {{stage.ErrNoContent, false}},
	"stage.ErrLink":      {{stage.ErrLink, false}},
	"stage.ErrChanged":   {{stage.ErrChanged, true}}, // a host source that changed while read: stage again when it is quiet
	"stage.ErrLimit":     {{stage.ErrLimit, false}},
	"stage.ErrNoPrune":   {{stage.ErrNoPrune, false}},
	//lint:ignore SA1019 the deprecated alias is still an exported error type of stage
	"stage.ExitError": {{&stage.ExitError{Status: 2}, false}},
	"stage.AssetError": {
		{&stage.AssetError{Op: "publish", Name: "skills", Path: "/w/.airlock/skills", Err: sandbox.ErrTransport}, true},
		{&stage.AssetError{Op: "read", Name: "skills", Path: "/src", Err: stage.ErrChanged}, true},
		{&stage.AssetError{Op: "read", Name: "skills", Path: "/src", Err: stage.ErrLink}, false},
		{&stage.AssetError{Op: "verify", Name: "skills", Path: "/w/.airlock/skills", Err: stage.ErrMismatch}, false},
		{&stage.AssetError{Op: "publish", Name: "skills", Path: "/w/.airlock/skills", Err: fmt.Errorf("%w: bad probe reply", sandbox.ErrProtocol)}, false},
	},

	// stage/remote.
	"stage/remote.ErrNoHostKeyCallback": {{remote.ErrNoHostKeyCallback, false}},
	"stage/remote.ErrUnknownHost":       {{remote.ErrUnknownHost, false}},
	"stage/remote.ErrForward":           {{remote.ErrForward, false}},      // a server configuration (AllowTcpForwarding) or a taken address: not cured by retrying
	"stage/remote.ErrEncryptedKey":      {{remote.ErrEncryptedKey, false}}, // ssh-add the key, or give its passphrase: not cured by retrying
	"stage/remote.ErrHostKeyMismatch":   {{remote.ErrHostKeyMismatch, false}},
	"stage/remote.HostKeyError": {
		{&remote.HostKeyError{Host: "h:22", Err: remote.ErrHostKeyMismatch}, false},
		{&remote.HostKeyError{Host: "h:22", Err: remote.ErrUnknownHost}, false},
	},

	// workspace.
	"workspace.ErrSpec":     {{workspace.ErrSpec, false}},
	"workspace.ErrTool":     {{workspace.ErrTool, false}},
	"workspace.ErrHostile":  {{fmt.Errorf("%w: bad report line", workspace.ErrHostile), false}},
	"workspace.ErrTooLarge": {{fmt.Errorf("%w: the bundle is larger than 10 bytes: raise WithMaxBytes", workspace.ErrTooLarge), false}},
	"workspace.ErrConflict": {{workspace.ErrConflict, false}},
	"workspace.ErrLocked": {{workspace.ErrLocked, true},
		{&fs.PathError{Op: "lock", Path: "/w/.git/airlock-restore.lock", Err: fmt.Errorf("%w: another restore held it", workspace.ErrLocked)}, true}},
	"workspace.ErrRace":       {{fmt.Errorf("%w: HEAD of /w moved during each of 5 attempts", workspace.ErrRace), true}},
	"workspace.ErrNoRound":    {{workspace.ErrNoRound, false}},
	"workspace.ErrBadState":   {{workspace.ErrBadState, false}},
	"workspace.ErrRepo":       {{workspace.ErrRepo, false}},
	"workspace.ToolError":     {{&workspace.ToolError{Tool: "git", Where: "sandbox"}, false}},
	"workspace.ConflictError": {{&workspace.ConflictError{Paths: []string{"a.txt"}}, false}},

	// deliverable.
	"deliverable.ErrPathDenied":     {{deliverable.ErrPathDenied, false}},
	"deliverable.ErrSymlinkDenied":  {{deliverable.ErrSymlinkDenied, false}},
	"deliverable.ErrHardlinkDenied": {{deliverable.ErrHardlinkDenied, false}},
	"deliverable.ErrFileChanged": {{deliverable.ErrFileChanged, false},
		// the shape of a local read: it wraps the walker's ErrChanged, which alone is retryable
		{&fs.PathError{Op: "read", Path: "report.md", Err: fmt.Errorf("%w: %w", deliverable.ErrFileChanged, stage.ErrChanged)}, false}},
	"deliverable.ErrSizeMismatch":        {{deliverable.ErrSizeMismatch, false}},
	"deliverable.ErrSizeDenied":          {{deliverable.ErrSizeDenied, false}},
	"deliverable.ErrContentTypeDenied":   {{deliverable.ErrContentTypeDenied, false}},
	"deliverable.ErrHashMismatch":        {{deliverable.ErrHashMismatch, false}},
	"deliverable.ErrInvalidRequest":      {{deliverable.ErrInvalidRequest, false}},
	"deliverable.ErrIdempotencyConflict": {{deliverable.ErrIdempotencyConflict, false}},
	"deliverable.ErrEvidence":            {{deliverable.ErrEvidence, false}},
	"deliverable.ErrNotFound":            {{deliverable.ErrNotFound, false}},
	"deliverable.ErrBusy":                {{fmt.Errorf("%w: attachment a1 now belongs to task t2", deliverable.ErrBusy), true}},
	"deliverable.ErrProtocol":            {{deliverable.ErrProtocol, false}},
	"deliverable.RequestError": {
		{&deliverable.RequestError{Field: "byteSize", Message: "fix it", Err: deliverable.ErrSizeMismatch}, false},
		{&deliverable.RequestError{Field: "contentRef", Message: "register it once it is complete",
			Err: &fs.PathError{Op: "read", Path: "report.md", Err: fmt.Errorf("%w: %w", deliverable.ErrFileChanged, stage.ErrChanged)}}, false},
		{&deliverable.RequestError{Message: "whatever it wraps", Err: sandbox.ErrTransport}, false}, // answers for itself
	},
	"deliverable.HostError": {
		{&deliverable.HostError{Op: "read workspace", Err: fmt.Errorf("%w: ssh: connection lost", sandbox.ErrTransport)}, true},
		{&deliverable.HostError{Op: "validate evidence", Err: deliverable.ErrBusy}, true},
		{&deliverable.HostError{Op: "read workspace", Err: deliverable.ErrProtocol}, false},
		{&deliverable.HostError{Op: "store", Err: &fs.PathError{Op: "write", Path: "/att/x", Err: syscall.ENOSPC}}, false},
		{&deliverable.HostError{Op: "register", Err: context.Canceled}, false},
	},
	"deliverable.EvidenceError": {{&deliverable.EvidenceError{Message: "cite report.md"}, false}},

	// skills.
	"skills.ErrInvalidSource": {{skills.ErrInvalidSource, false}},
	"skills.ErrChanged":       {{skills.ErrChanged, true}},
	"skills.ErrLimit":         {{skills.ErrLimit, false}},
	"skills.LimitError":       {{&skills.LimitError{Skill: "review", Limit: "files", Max: 1}, false}},
	"skills.ErrFrontmatter":   {{skills.ErrFrontmatter, false}},
	"skills.ErrSpec":          {{skills.ErrSpec, false}},

	// session: every error is a record or an input that does not fit.
	"session.ErrDrift":                 {{session.ErrDrift, false}},
	"session.ErrUnsupportedSchema":     {{session.ErrUnsupportedSchema, false}},
	"session.ErrUnknownField":          {{session.ErrUnknownField, false}},
	"session.ErrMalformedRecord":       {{session.ErrMalformedRecord, false}},
	"session.ErrInvalidWorkspace":      {{session.ErrInvalidWorkspace, false}},
	"session.ErrInvalidStateDir":       {{session.ErrInvalidStateDir, false}},
	"session.ErrInvalidSkillsDigest":   {{session.ErrInvalidSkillsDigest, false}},
	"session.ErrUnqualifiedModel":      {{session.ErrUnqualifiedModel, false}},
	"session.ErrInvalidSessionID":      {{session.ErrInvalidSessionID, false}},
	"session.ErrInvalidPermissionMode": {{session.ErrInvalidPermissionMode, false}},
	"session.ErrInvalidBinding":        {{session.ErrInvalidBinding, false}},
	"session.DriftError":               {{&session.DriftError{Fields: []string{"model"}}, false}},
}

// TestRetryable checks each answer as declared, wrapped by a caller's
// context, and inside the *fs.PathError a path operation returns.
func TestRetryable(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(answers)) {
		for i, a := range answers[name] {
			assert.Equal(t, a.want, sandbox.Retryable(a.err), "%s [%d]", name, i)
			assert.Equal(t, a.want, sandbox.Retryable(fmt.Errorf("run turn 3: %w", a.err)), "%s [%d] wrapped", name, i)
			assert.Equal(t, a.want, sandbox.Retryable(&fs.PathError{Op: "restore", Path: "/w", Err: a.err}), "%s [%d] in a PathError", name, i)
		}
	}
}

// TestRetryableRules pins the rules themselves, on errors from outside the
// module.
func TestRetryableRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"an unknown error", errors.New("anything"), false},
		{"the caller cancelled", context.Canceled, false},
		{"the caller's deadline, though it says Temporary", context.DeadlineExceeded, false},
		{"the caller's deadline, wrapped", fmt.Errorf("stage: %w", context.DeadlineExceeded), false},
		{"a transport failure that the caller's end caused", fmt.Errorf("%w: %w", sandbox.ErrTransport, context.Canceled), true},
		{"a full disk", &fs.PathError{Op: "write", Path: "/w/a", Err: syscall.ENOSPC}, false},
		{"a quota", &fs.PathError{Op: "write", Path: "/w/a", Err: syscall.EDQUOT}, false},
		{"an interrupted call", &fs.PathError{Op: "read", Path: "/w/a", Err: syscall.EINTR}, true},
		{"too many open files", &fs.PathError{Op: "open", Path: "/w/a", Err: syscall.EMFILE}, true},
		{"an I/O deadline", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), true},
		{"a protocol break before a transport failure", errors.Join(sandbox.ErrProtocol, sandbox.ErrTransport), false},
		{"a transport failure before a protocol break", errors.Join(sandbox.ErrTransport, sandbox.ErrProtocol), false},
		{"an error that answers for itself before ErrProtocol", fmt.Errorf("%w: %w", says(true), sandbox.ErrProtocol), true},
		{"an error that answers for itself before ErrTransport", fmt.Errorf("%w: %w", says(false), sandbox.ErrTransport), false},
		{"an exit status", fmt.Errorf("setup: %w", &sandbox.ExitError{Status: 1}), false},
	} {
		assert.Equal(t, tc.want, sandbox.Retryable(tc.err), "%s: %v", tc.name, tc.err)
	}
}

// says is an error with a Retryable method.
type says bool

func (s says) Error() string   { return fmt.Sprintf("says retryable=%t", bool(s)) }
func (s says) Retryable() bool { return bool(s) }

// hangingRunner never returns before its context ends, and reports a short
// control deadline.
type hangingRunner struct{}

func (hangingRunner) Run(ctx context.Context, _ sandbox.Command) error {
	<-ctx.Done()
	return ctx.Err()
}
func (hangingRunner) ControlTimeout() time.Duration { return 50 * time.Millisecond }

// TestRetryableReal checks errors that the packages themselves return.
func TestRetryableReal(t *testing.T) {
	ctx := t.Context()

	err := sandbox.Control(ctx, hangingRunner{}, sandbox.Command{Script: "true"})
	require.ErrorIs(t, err, sandbox.ErrTransport)
	assert.ErrorContains(t, err, "control deadline")
	assert.True(t, sandbox.Retryable(err), "an expired control deadline: %v", err)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	err = sandbox.Control(cancelled, hangingRunner{}, sandbox.Command{Script: "true"})
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, sandbox.Retryable(err), "Control reports the caller's cancel as ErrTransport; the caller knows it cancelled: %v", err)

	err = sandbox.Control(ctx, sandbox.Local(t.TempDir()), sandbox.Command{Script: "exit 3"})
	var ee *sandbox.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 3, ee.Status)
	assert.False(t, sandbox.Retryable(err), "%v", err)

	// The host's own failure through Control: a Stdout on a full disk.
	full := writerFunc(func([]byte) (int, error) {
		return 0, &fs.PathError{Op: "write", Path: "/host/out", Err: syscall.ENOSPC}
	})
	err = sandbox.Control(ctx, sandbox.Local(t.TempDir()), sandbox.Command{Script: "echo out", Stdout: full})
	require.ErrorIs(t, err, syscall.ENOSPC)
	assert.False(t, sandbox.Retryable(err), "a full disk under Control's Stdout: %v", err)

	// A sandbox that forges a second completion record (ErrProtocol).
	err = sandbox.Control(ctx, sandbox.FromExec(forgingEngine(func(tag string) string {
		return tag + "start 42 group\n" + tag + "end 0 \n" + tag + "end 0 \n"
	})), sandbox.Command{Script: "true"})
	require.ErrorIs(t, err, sandbox.ErrProtocol)
	assert.False(t, sandbox.Retryable(err), "%v", err)

	dir, err := stage.NewDir(t.TempDir())
	require.NoError(t, err)
	_, err = stage.Stage(ctx, dir, "relative/root", nil)
	require.ErrorIs(t, err, stage.ErrBadRoot)
	assert.False(t, sandbox.Retryable(err), "%v", err)

	src := filepath.Join(t.TempDir(), "review")
	require.NoError(t, os.MkdirAll(src, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "SKILL.md"), []byte("---\nname: review\ndescription: Reviews.\n---\nbody\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "extra.md"), []byte("x\n"), 0o644))
	_, err = skills.Materialize(ctx, t.TempDir(), []skills.Source{{Key: "k", Name: "review", Dir: src}}, skills.WithLimits(skills.Limits{MaxFiles: 1}))
	var le *skills.LimitError
	require.ErrorAs(t, err, &le)
	assert.False(t, sandbox.Retryable(err), "%v", err)

	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "report.md"), []byte("findings\n"), 0o644))
	local, err := deliverable.LocalWorkspace(ws)
	require.NoError(t, err)
	files, err := deliverable.NewFileStore(afero.NewMemMapFs(), "/attachments")
	require.NoError(t, err)
	reg := &deliverable.Registrar{Store: files}
	_, err = reg.Register(ctx, local, "task-1", "run-1", deliverable.Request{ContentRef: "report.md", Filename: "report.md",
		ContentType: "text/markdown", ByteSize: 99, SHA256: strings.Repeat("0", 64), Title: "Findings", IdempotencyKey: "k"})
	var re *deliverable.RequestError
	require.ErrorAs(t, err, &re)
	assert.ErrorIs(t, err, deliverable.ErrSizeMismatch)
	assert.False(t, sandbox.Retryable(err), "%v", err)
}

// TestRetryableCoversEveryError parses the module's library packages (every
// directory with Go files but internal/, examples/, testdata and programs)
// and fails on an exported Err… sentinel or …Error type that answers is
// missing, and on a row of answers that names nothing.
func TestRetryableCoversEveryError(t *testing.T) {
	declared := exportedErrors(t, "..")
	require.Contains(t, declared, "workspace.ErrLocked", "the parse found the packages")
	for _, name := range declared {
		if _, ok := answers[name]; !ok {
			t.Errorf("%s is not in answers (sandbox/retryable_test.go): decide whether sandbox.Retryable says true for it, and make it answer so", name)
		}
	}
	for name := range answers {
		if !slices.Contains(declared, name) {
			t.Errorf("answers lists %s, which no package declares", name)
		}
	}
}

// exportedErrors returns "<dir>.<Name>" for every exported top-level var
// named Err… and type named …Error in the library packages under root.
func exportedErrors(t *testing.T, root string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch base := d.Name(); {
			case rel == ".":
			case rel == "internal", rel == "examples", base == "testdata", strings.HasPrefix(base, "."), strings.HasPrefix(base, "_"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if pkg == "." {
			pkg = "airlock"
		}
		for _, n := range errorDecls(f) {
			names = append(names, pkg+"."+n)
		}
		return nil
	})
	require.NoError(t, err)
	slices.Sort(names)
	return slices.Compact(names)
}

// errorDecls returns the exported Err… vars and …Error types of f.
func errorDecls(f *ast.File) []string {
	var names []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gd.Specs {
			switch s := spec.(type) {
			case *ast.ValueSpec:
				for _, id := range s.Names {
					if gd.Tok == token.VAR && id.IsExported() && strings.HasPrefix(id.Name, "Err") {
						names = append(names, id.Name)
					}
				}
			case *ast.TypeSpec:
				if s.Name.IsExported() && strings.HasSuffix(s.Name.Name, "Error") {
					names = append(names, s.Name.Name)
				}
			}
		}
	}
	return names
}
