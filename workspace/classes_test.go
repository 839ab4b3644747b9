package workspace_test

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/sandbox"
	"github.com/airlockdev/airlock/workspace"
)

// TestErrorClasses: each failure kind of a round has one class. A sandbox
// whose reply breaks the protocol (probe, restore header, report, tail, tar
// stream) is workspace.ErrHostile and sandbox.ErrProtocol, never
// ErrTransport; the same reply cut by a lost connection is
// sandbox.ErrTransport, never ErrProtocol. Each error names what failed.
func TestErrorClasses(t *testing.T) {
	oid := strings.Repeat("a", 40)
	isProbeCmd := func(cmd sandbox.Command) bool { return strings.Contains(cmd.Script, "gitversion") }
	for _, tc := range []struct {
		name  string
		kind  string // "git" or "plain"
		probe bool   // the reply answers Prepare's probe, else Restore's stream
		reply string // what the sandbox writes
		cut   bool   // the connection is lost after the reply
		class error  // sandbox.ErrProtocol or sandbox.ErrTransport
		msg   string // the error says
	}{
		{name: "probe garbage", kind: "git", probe: true, reply: "tool git\nhello\nend\n", class: sandbox.ErrProtocol, msg: `unexpected sandbox probe line "hello"`},
		{name: "probe without end", kind: "plain", probe: true, reply: "tool tar\n", class: sandbox.ErrProtocol, msg: "did not end with its end line"},
		{name: "probe cut", kind: "plain", probe: true, reply: "tool tar\n", cut: true, class: sandbox.ErrTransport, msg: "probing the sandbox"},
		{name: "bad magic", kind: "git", reply: "airlock-restore 2\n", class: sandbox.ErrProtocol, msg: `the restore stream starts with "airlock-restore 2"`},
		{name: "bad report line", kind: "plain", reply: "airlock-restore 1\nreport -1\n", class: sandbox.ErrProtocol, msg: `bad report line "report -1"`},
		{name: "report record escapes", kind: "git", reply: "airlock-restore 1\nreport 6\nh../x\x00nochange\n", class: sandbox.ErrProtocol, msg: "not a clean relative path"},
		{name: "report record out of bounds", kind: "plain", reply: "airlock-restore 1\nreport 99\nh./x\x00", class: sandbox.ErrProtocol, msg: "the report ended early"},
		{name: "report cut", kind: "plain", reply: "airlock-restore 1\nreport 99\nh./x\x00", cut: true, class: sandbox.ErrTransport, msg: "connection reset"},
		{name: "bad tail", kind: "git", reply: "airlock-restore 1\nreport 0\nstaged 0\nbundle " + oid + "\n", class: sandbox.ErrProtocol, msg: "bad restore tail line"},
		{name: "plain tail for git", kind: "git", reply: "airlock-restore 1\nreport 0\nstaged 0\ntar\n", class: sandbox.ErrProtocol, msg: `bad restore tail line "tar"`},
		{name: "header line unended", kind: "plain", reply: "airlock-restore 1\nrep", class: sandbox.ErrProtocol, msg: "ended inside a header line"},
		{name: "header line cut", kind: "git", reply: "airlock-restore 1\nrep", cut: true, class: sandbox.ErrTransport, msg: "connection reset"},
		{name: "tar garbage", kind: "plain", reply: "airlock-restore 1\nreport 0\ntar\n" + strings.Repeat("not a tar stream ", 64), class: sandbox.ErrProtocol, msg: "malformed tar stream"},
		{name: "tar cut", kind: "plain", reply: "airlock-restore 1\nreport 0\ntar\n" + strings.Repeat("\x00", 100), cut: true, class: sandbox.ErrTransport, msg: "connection reset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(t *testing.T, dir string) sandbox.Runner { return sandbox.Local(dir) })
			fr := &fakeRunner{real: e.spec.Runner}
			e.spec.Runner = fr
			var r *workspace.Round
			if !tc.probe {
				r = prepareOneFile(t, e, tc.kind)
			} else if tc.kind == "git" {
				initRepo(t, e.local, map[string]string{"a": "1\n"})
			}
			match := isRestore
			if tc.probe {
				match = isProbeCmd
			}
			fr.inject = func(cmd sandbox.Command) (bool, error) {
				if !match(cmd) {
					return false, nil
				}
				if _, err := io.WriteString(cmd.Stdout, tc.reply); err != nil {
					return true, err
				}
				if tc.cut {
					return true, errConnLost
				}
				return true, nil
			}
			var err error
			if tc.probe {
				_, err = workspace.Prepare(ctx(t), e.spec)
			} else {
				_, err = r.Restore(ctx(t))
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.class)
			if tc.class == sandbox.ErrProtocol {
				assert.ErrorIs(t, err, workspace.ErrHostile, "the package's sentinel")
				assert.NotErrorIs(t, err, sandbox.ErrTransport)
			} else {
				assert.NotErrorIs(t, err, sandbox.ErrProtocol)
				assert.NotErrorIs(t, err, workspace.ErrHostile)
			}
			assert.Contains(t, err.Error(), tc.msg)
			if !tc.probe {
				assert.Equal(t, "1\n", read(t, e.local, "a"), "a failed restore writes nothing")
			}
		})
	}
}
