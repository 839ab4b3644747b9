package shell_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
)

const testTag = "0123456789abcdef0123456789abcdef"

func TestParseProcessHeader(t *testing.T) {
	line := func(rest string) []byte { return []byte("airlock-process-v1 " + testTag + " " + rest) }
	for _, c := range []struct {
		in   []byte
		want shell.ProcessHeader
	}{
		{line("42 42 42"), shell.ProcessHeader{PID: 42, Group: 42, Session: 42}},
		{line("42 42 -"), shell.ProcessHeader{PID: 42, Group: 42, Session: -1}}, // set -m: a group, not a session
		{line("42 - -"), shell.ProcessHeader{PID: 42, Group: -1, Session: -1}},  // neither (dash without setsid), or no /proc: the tag alone
		{line("2147483647 2147483647 2147483647"), shell.ProcessHeader{PID: 1<<31 - 1, Group: 1<<31 - 1, Session: 1<<31 - 1}},
		{line("42 42 42 pid:[4026531836]"), shell.ProcessHeader{PID: 42, Group: 42, Session: 42, NS: "pid:[4026531836]"}},
		{line("42 42 - pid:[4026532101]"), shell.ProcessHeader{PID: 42, Group: 42, Session: -1, NS: "pid:[4026532101]"}},
		{line("42 - - -"), shell.ProcessHeader{PID: 42, Group: -1, Session: -1}}, // namespace unreadable
		{line("42 42 42 pid:[" + strings.Repeat("9", 20) + "]"), shell.ProcessHeader{PID: 42, Group: 42, Session: 42, NS: "pid:[" + strings.Repeat("9", 20) + "]"}},
	} {
		h, err := shell.ParseProcessHeader(c.in, testTag)
		require.NoError(t, err, "%q", c.in)
		assert.Equal(t, c.want, h, "%q", c.in)
	}
	for _, in := range [][]byte{
		nil, []byte(""), line(""), line("42 42"), line("42 42 42 42"), line("42 42 42 "), line(" 42 42 42"),
		line("1 1 1"), line("0 0 0"), line("-5 -5 -5"), line("+5 5 5"), line("05 5 5"), line("2147483648 1 1"),
		line("99999999999 1 1"), line("42 x 42"), line("42 42 -" + "1"), line("42 42 42\r"), line("4\x002 42 42"),
		[]byte("airlock-process-v1 " + strings.Repeat("ab", 16) + " 42 42 42"), // another tag
		[]byte("airlock-process-v2 " + testTag + " 42 42 42"),
		[]byte("airlock-process-v1  " + testTag + " 42 42 42"),
		line("42 42 " + strings.Repeat("4", 100)),
		// Impossible for the leader, which leads its group (setsid: and its
		// session) and prints "-" for what it does not lead: a forgery that
		// would aim the signals at other processes' group or session.
		line("100 200 300"), line("100 200 300 pid:[4026531836]"), line("42 42 7"), line("42 7 7"), line("42 7 -"),
		line("42 1 0"), line("42 - 42"), line("42 - 7"), line("42 0 42"), line("42 -1 -1"), line("42 042 42"),
		// A namespace that is not readlink's form.
		line("42 42 42 42"), line("42 42 42 pid:[]"), line("42 42 42 pid:[12a]"), line("42 42 42 net:[4026531836]"),
		line("42 42 42 pid:[1] "), line("42 42 42 pid:[1] x"), line("42 42 42 pid:[" + strings.Repeat("9", 21) + "]"),
		line("42 42 42 'pid:[1]'"), line("42 42 42 pid:[$(id)]"),
	} {
		_, err := shell.ParseProcessHeader(in, testTag)
		assert.ErrorIs(t, err, shell.ErrProtocol, "%q", in)
	}
}

// FuzzParseProcessHeader: whatever it accepts names a pid that is not
// init's or the kernel's, and a group and session that are the pid's own
// or none.
func FuzzParseProcessHeader(f *testing.F) {
	f.Add([]byte("airlock-process-v1 " + testTag + " 42 42 42"))
	f.Add([]byte("airlock-process-v1 " + testTag + " 42 - 7"))
	f.Add([]byte("airlock-process-v1 " + testTag + " 1 1 1"))
	f.Add([]byte("airlock-process-v1 " + testTag + " 100 200 300"))
	f.Add([]byte("airlock-process-v1 " + testTag + " 42 42 - pid:[4026531836]"))
	f.Fuzz(func(t *testing.T, line []byte) {
		h, err := shell.ParseProcessHeader(line, testTag)
		if err != nil {
			if !errors.Is(err, shell.ErrProtocol) {
				t.Fatalf("%q: %v does not wrap ErrProtocol", line, err)
			}
			return
		}
		if h.PID < 2 || (h.Group != -1 && h.Group != h.PID) || (h.Session != -1 && h.Session != h.PID) || (h.Session == h.PID && h.Group != h.PID) {
			t.Fatalf("%q: accepted %+v", line, h)
		}
		if f := strings.Fields(string(line)); len(f) < 5 || (f[3] != "-" && f[3] != f[2]) || (f[4] != "-" && f[4] != f[2]) {
			t.Fatalf("%q: accepted a group or session other than the pid (%+v)", line, h)
		}
		if h.NS != "" && !regexp.MustCompile(`^pid:\[[0-9]{1,20}\]$`).MatchString(h.NS) {
			t.Fatalf("%q: accepted the namespace %q", line, h.NS)
		}
		if !bytes.HasPrefix(line, []byte("airlock-process-v1 "+testTag+" "+strconv.Itoa(h.PID)+" ")) {
			t.Fatalf("%q: accepted without the tag and pid it reports (%+v)", line, h)
		}
	})
}

func TestParseProcessReply(t *testing.T) {
	r := "airlock-process-v1-" + testTag + " "
	for in, want := range map[string]shell.ProcessReply{
		r + "gone\n":     {Gone: true},
		r + "noproc\n":   {NoProc: true},
		r + "left 3\n":   {Left: 3},
		r + "left 300\n": {Left: 300},
		r + "otherns\n":  {OtherNS: true},
	} {
		got, err := shell.ParseProcessReply([]byte(in), testTag)
		require.NoError(t, err, "%q", in)
		assert.Equal(t, want, got, "%q", in)
	}
	for _, in := range []string{
		"", "\n", r + "gone", r + "gone\n\n", "x\n" + r + "gone\n", r + "left 0\n", r + "left -1\n", r + "left\n",
		r + "left 3 \n", r + "Gone\n", r + "otherns \n", r + "otherns 1\n", "airlock-process-v1-" + strings.Repeat("ab", 16) + " gone\n",
		r + "gone\n" + strings.Repeat("x", shell.MaxProcessReply),
	} {
		_, err := shell.ParseProcessReply([]byte(in), testTag)
		assert.ErrorIs(t, err, shell.ErrProtocol, "%q", in)
	}
}

// shellCase is one POSIX sh and PATH the scripts are run under.
type shellCase struct {
	name string
	sh   []string
	path string
	own  string // what the command leads: "session" (and group), "group", ""
}

// shellCases are dash and busybox sh with the machine's tools, busybox sh
// with busybox's applets alone (its setsid, grep, sleep), dash without
// setsid (no session: the tag alone finds the processes) and bash without
// setsid (job control: a group of its own).
func shellCases(t *testing.T) []shellCase {
	var cases []shellCase
	dash, err := exec.LookPath("dash")
	if err != nil {
		t.Log("dash not found (apt-get install dash): its cases are skipped")
	} else {
		cases = append(cases, shellCase{"dash", []string{dash}, os.Getenv("PATH"), "session"})
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Log("busybox not found (apt-get install busybox): its cases are skipped")
	} else {
		applets := t.TempDir()
		out, err := exec.Command(bb, "--install", "-s", applets).CombinedOutput()
		require.NoError(t, err, "busybox --install: %s", out)
		cases = append(cases,
			shellCase{"busybox", []string{bb, "sh"}, os.Getenv("PATH"), "session"},
			shellCase{"busybox-applets", []string{bb, "sh"}, applets, "session"})
	}
	tools := t.TempDir()
	for _, tool := range []string{"grep", "sleep", "cat"} {
		p, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(tools, tool)))
	}
	if dash != "" {
		cases = append(cases, shellCase{"dash-no-setsid", []string{dash}, tools, ""})
	}
	if bash, err := exec.LookPath("bash"); err != nil {
		t.Log("bash not found: the job-control case (set -m without setsid) is skipped")
	} else {
		cases = append(cases, shellCase{"bash-no-setsid", []string{bash, "--posix"}, tools, "group"})
	}
	if len(cases) == 0 {
		t.Skip("neither dash nor busybox is installed: the scripts cannot be run under them")
	}
	return cases
}

// has reports whether tool is on c's PATH.
func (c shellCase) has(tool string) bool {
	for _, dir := range filepath.SplitList(c.path) {
		if _, err := os.Stat(filepath.Join(dir, tool)); err == nil {
			return true
		}
	}
	return false
}

func (c shellCase) command(script string) *exec.Cmd {
	cmd := exec.Command(c.sh[0], append(c.sh[1:], "-c", script)...)
	cmd.Env = []string{"PATH=" + c.path}
	return cmd
}

// TestProcessScriptsParse: every script passes sh -n under every shell.
func TestProcessScriptsParse(t *testing.T) {
	h := shell.ProcessHeader{PID: 42, Group: 42, Session: -1}
	scripts := map[string]string{
		"wrapper": shell.ProcessWrapper(testTag, "echo 'it''s' \"$HOME\"; exit 3"),
		"TERM":    shell.ProcessSignal(testTag, h, "TERM", 10),
		"KILL":    shell.ProcessSignal(testTag, shell.ProcessHeader{Group: -1, Session: -1}, "KILL", 0),
	}
	for _, c := range shellCases(t) {
		for name, s := range scripts {
			out, err := exec.Command(c.sh[0], append(c.sh[1:], "-n", "-c", s)...).CombinedOutput()
			assert.NoError(t, err, "%s: %s: sh -n: %s", c.name, name, out)
		}
	}
}

// TestProcessScriptsRun runs the wrapper with a TERM-ignoring tree under
// each shell, then the signal scripts: TERM leaves the tree, KILL ends it,
// and the wrapper reports the leader killed by KILL.
func TestProcessScriptsRun(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the signal scripts are verified through /proc: Linux only")
	}
	// The leader ends only by a signal: after its children it blocks on
	// its stdin (kept open), so a KILL that reaches the children first
	// cannot let it exit 0 before its own KILL arrives (a flake under
	// load, seen once).
	tree := `trap '' TERM; (trap '' TERM; sleep 300) & sleep 300 & printf 'out\000\377\n'; read -r line; echo "got $line"; wait; read -r line`
	for _, c := range shellCases(t) {
		t.Run(c.name, func(t *testing.T) {
			tag := randomTag(t)
			cmd := c.command(shell.ProcessWrapper(tag, tree))
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			stderr := &shell.LimitedBuffer{Max: 64 << 10, Truncate: true} // read while the command may write
			cmd.Stderr = stderr
			require.NoError(t, cmd.Start())
			t.Cleanup(func() {
				for _, pid := range tagged(t, tag) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			br := bufio.NewReader(stdout)
			line, err := br.ReadBytes('\n')
			require.NoError(t, err, "stderr: %s", stderr.String())
			h, err := shell.ParseProcessHeader(bytes.TrimSuffix(line, []byte("\n")), tag)
			require.NoError(t, err)
			ns, err := os.Readlink("/proc/self/ns/pid")
			require.NoError(t, err)
			if !c.has("readlink") {
				ns = "" // the leader cannot read its namespace: unknown, "-"
			}
			switch c.own {
			case "session":
				assert.Equal(t, shell.ProcessHeader{PID: h.PID, Group: h.PID, Session: h.PID, NS: ns}, h)
			case "group":
				assert.Equal(t, shell.ProcessHeader{PID: h.PID, Group: h.PID, Session: -1, NS: ns}, h, "set -m: a group of its own in the wrapper's session")
			default:
				assert.Equal(t, shell.ProcessHeader{PID: h.PID, Group: -1, Session: -1, NS: ns}, h, "no setsid, no job control in dash: no group of its own")
			}
			out := make([]byte, 5)
			_, err = io.ReadFull(br, out)
			require.NoError(t, err)
			assert.Equal(t, "out\x00\xff", string(out), "the command's output follows the header byte for byte")
			_, err = fmt.Fprintln(stdin, "input")
			require.NoError(t, err)
			for _, want := range []string{"\n", "got input\n"} {
				got, err := br.ReadString('\n')
				require.NoError(t, err)
				assert.Equal(t, want, got, "the command reads the wrapper's stdin")
			}
			// The background children were forked before the output, but a
			// shell may still be between fork and exec (busybox): wait for
			// them to show in /proc.
			var tree []int
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if tree = tagged(t, tag); len(tree) >= 3 || time.Now().After(deadline) {
					break
				}
			}
			require.GreaterOrEqual(t, len(tree), 3, "the leader, a subshell and sleeps carry the tag")
			elsewhere := h
			elsewhere.NS = "pid:[1]" // no namespace has inode 1: the step runs in another
			assert.Equal(t, "otherns", signal(t, c, tag, elsewhere, "KILL", 3), "from another PID namespace its pids are not its")
			assert.ElementsMatch(t, tree, tagged(t, tag), "a step in another PID namespace signals nothing")
			assert.Equal(t, "left "+strconv.Itoa(len(tree)), signal(t, c, tag, h, "TERM", 3), "TERM is ignored by all")
			assert.Equal(t, "gone", signal(t, c, tag, h, "KILL", 20))
			assert.Empty(t, tagged(t, tag), "nothing tagged is left")
			err = cmd.Wait()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			ws := ee.Sys().(syscall.WaitStatus)
			assert.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the wrapper re-raises the leader's signal: %v", ws)
			assert.Equal(t, "gone", signal(t, c, tag, h, "TERM", 3), "a step finds nothing to do")
		})
	}
}

// signal runs the signal script under c and returns its reply without the
// tag.
func signal(t *testing.T, c shellCase, tag string, h shell.ProcessHeader, sig string, rounds int) string {
	t.Helper()
	out, err := c.command(shell.ProcessSignal(tag, h, sig, rounds)).Output()
	require.NoError(t, err)
	_, err = shell.ParseProcessReply(out, tag)
	require.NoError(t, err)
	return strings.TrimSuffix(strings.TrimPrefix(string(out), "airlock-process-v1-"+tag+" "), "\n")
}

// tagged returns the live processes of this machine that carry tag.
func tagged(t *testing.T, tag string) []int {
	t.Helper()
	env, err := filepath.Glob("/proc/[0-9]*/environ")
	require.NoError(t, err)
	var pids []int
	for _, f := range env {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(append([]byte{0}, b...), []byte("\x00"+shell.ProcessTagVar+"="+tag+"\x00")) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(f), "stat"))
		if err != nil {
			continue
		}
		if fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(fields) > 0 && fields[0] != "Z" {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// randomTag returns a fresh process tag, so that concurrent runs of these
// tests never see each other's processes.
func randomTag(t *testing.T) string {
	var b [16]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}
