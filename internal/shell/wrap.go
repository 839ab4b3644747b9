package shell

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The environment prelude: Command.Env travels on the command's stdin,
// ahead of the script's own input, never in an argv. The host writes one
// line per variable (EnvLines), each an `export NAME='value'` with every
// newline of the value spelled '"$1"' (the prelude sets $1 to a newline),
// then the terminator line EnvEnd; the sandbox side (EnvReader) reads and
// evaluates one line at a time until the terminator. read(1) takes one byte
// at a time from a pipe, so the script's stdin starts exactly after the
// terminator, and the delivery is linear in the environment's size (at most
// six bytes on stdin per byte of a value).
const (
	// EnvReserved starts the names of the wrappers' own shell variables;
	// no Command.Env name may use it (CheckEnvNames).
	EnvReserved = "__airlock_"
	// EnvEnd ends the environment on stdin. Every other line of it is an
	// assignment, so no value can end it early.
	EnvEnd = "__airlock_env_end"
)

// CheckEnvNames refuses a variable name that starts with EnvReserved.
func CheckEnvNames(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if strings.HasPrefix(k, EnvReserved) {
			return fmt.Errorf("environment variable %s: names starting with %s are the prelude's own; rename it; nothing was run", k, EnvReserved)
		}
	}
	return nil
}

// EnvQuote quotes v as one line of shell: single quotes, with each ' and
// each newline ("$1", which the prelude sets to one) outside them.
func EnvQuote(v string) string {
	var sb strings.Builder
	sb.Grow(len(v) + 2)
	sb.WriteByte('\'')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\'':
			sb.WriteString(`'"'"'`)
		case '\n':
			sb.WriteString(`'"$1"'`)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte('\'')
	return sb.String()
}

// EnvLines returns what the host writes on stdin for env: one export line
// per variable, sorted by name, without the terminator (the caller may add
// lines of its own, assignments to EnvReserved names, before EnvEnd).
func EnvLines(env map[string]string) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		sb.WriteString("export " + k + "=" + EnvQuote(env[k]) + "\n")
	}
	return sb.String()
}

// EnvReader returns the sh text that reads the prelude from stdin: every
// line up to EnvEnd is evaluated; stdin that ends before the terminator (a
// host or a transport that died mid-prelude) runs onCut instead of the
// script, which must not run with half its environment.
func EnvReader(onCut string) string {
	return "set -- '\n'\n__airlock_ok=\n" +
		"while IFS= read -r __airlock_l; do [ \"$__airlock_l\" = " + EnvEnd + " ] && { __airlock_ok=1; break; }; eval \"$__airlock_l\"; done\n" +
		"[ -n \"$__airlock_ok\" ] || { " + onCut + "; }\nunset __airlock_l __airlock_ok; set --\n"
}

// The header line remote.Host's wrapper writes first on stderr: the
// supervisor's pid, or that Command.Dir is missing.
const (
	HeaderPrefix = "airlock-remote: "
	HeaderPid    = "pid "
	HeaderNoDir  = "no-dir"
)

// HeaderScript returns the sh text that enters dir (when not "") and
// writes the header: on a missing dir the no-dir header and exit 125.
func HeaderScript(dir string) string {
	var sb strings.Builder
	if dir != "" {
		fmt.Fprintf(&sb, "cd %s 2>/dev/null || { printf '%s\\n' >&2; exit 125; }\n", Quote(dir), HeaderPrefix+HeaderNoDir)
	}
	fmt.Fprintf(&sb, "printf '%s%%s\\n' \"$$\" >&2\n", HeaderPrefix+HeaderPid)
	return sb.String()
}

// Supervise returns the sh text that runs script as a child sh of a small
// supervisor shell, so that a TERM (or HUP, INT) to the supervisor stops
// everything the script started even when the script ignores TERM (it
// kills the supervisor's process group). The child has a $$ of its own;
// one killed by a signal is reported as killed by that signal (the
// supervisor re-raises it on itself). remote.Host runs it.
func Supervise(script string) string {
	return fmt.Sprintf("__airlock_c=%s\nexec 3<&0\ntrap 'kill -KILL 0 2>/dev/null' TERM HUP INT\n/bin/sh -c \"$__airlock_c\" <&3 3<&- &\n__airlock_p=$!\nexec 3<&-\nwait \"$__airlock_p\"\n__airlock_s=$?\n"+
		"if [ \"$__airlock_s\" -gt 128 ] && [ \"$__airlock_s\" -lt 193 ]; then trap - TERM HUP INT; kill -s \"$(kill -l \"$__airlock_s\")\" $$ 2>/dev/null; fi\nexit \"$__airlock_s\"\n", Quote(script))
}

// SessionCommand is the command remote.Host asks the SSH server to run:
// wrapper (EnvReader, HeaderScript and Supervise, in that order) as the
// one argument of the server's /bin/sh.
func SessionCommand(wrapper string) string { return "exec /bin/sh -c " + Quote(wrapper) }

// StopSupervisorScript stops the supervisor whose pid the header reported
// (HeaderPid), from a second session, on a server that ignores signal
// requests: TERM (its trap kills its process group), a moment's grace,
// then KILL. It always exits 0.
func StopSupervisorScript(pid int) string {
	return fmt.Sprintf("kill -TERM %d 2>/dev/null; sleep 0.2; kill -KILL %d 2>/dev/null; exit 0", pid, pid)
}

// HeaderWriter passes everything to W except the header line (see
// HeaderPrefix), which it parses and swallows. What the session's login
// shell writes before the wrapper starts (a noisy rc file: a .bashrc
// whose tools complain) comes before the header: whole lines ahead of the
// header are held, up to maxPreHeader bytes, and dropped once the header
// comes, since they are not the command's. When no header comes (the
// wrapper never ran: no /bin/sh, say) End passes them on; past
// maxPreHeader everything held is passed on and no header is looked for.
// It is safe for concurrent use.
type HeaderWriter struct {
	W     io.Writer // nil: discard
	mu    sync.Mutex
	head  []byte
	done  bool
	pid   int
	noDir bool
}

// maxPreHeader bounds what a HeaderWriter holds while it waits for the
// header.
const maxPreHeader = 64 << 10

// Write passes p on to W once the header has been parsed and swallowed.
func (m *HeaderWriter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(p)
	if !m.done {
		m.head = append(m.head, p...)
		p = m.findHeader()
		if !m.done {
			return n, nil
		}
	}
	if m.W == nil || len(p) == 0 {
		return n, nil
	}
	if _, err := m.W.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}

// findHeader looks for the header at the start of a line in what is
// held: when found it is parsed, what came before it dropped, and what
// follows it returned (done set); past maxPreHeader everything held is
// returned (done set); else nil, and it waits for more.
func (m *HeaderWriter) findHeader() []byte {
	start := 0
	for {
		i := bytes.IndexByte(m.head[start:], '\n')
		if i < 0 {
			break
		}
		line := m.head[start : start+i]
		if v, ok := bytes.CutPrefix(line, []byte(HeaderPrefix)); ok {
			if pid, ok := strings.CutPrefix(string(v), HeaderPid); ok {
				m.pid, _ = strconv.Atoi(pid)
			} else if string(v) == HeaderNoDir {
				m.noDir = true
			}
			rest := m.head[start+i+1:]
			m.done, m.head = true, nil
			return rest
		}
		start += i + 1
	}
	if len(m.head) > maxPreHeader {
		rest := m.head
		m.done, m.head = true, nil
		return rest
	}
	return nil
}

// End passes on what is still held when no header came (the session
// ended before the wrapper ran), and looks for no header after it.
func (m *HeaderWriter) End() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return nil
	}
	rest := m.head
	m.done, m.head = true, nil
	if m.W == nil || len(rest) == 0 {
		return nil
	}
	_, err := m.W.Write(rest)
	return err
}

// State returns what the header said: the supervisor's pid (0 when not
// seen) and whether the directory was missing.
func (m *HeaderWriter) State() (pid int, noDir bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pid, m.noDir
}
