package shell

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// The wrapper of sandbox.Exec: what `argv... sh -c <wrapper>` runs in the
// sandbox, and the parsers of what it sends back.
//
// The wrapper reads the prelude from stdin (the call's nonce and run id,
// the control deadline, the script when it is large, then the environment;
// see EnvReader; the environment is exported only in the script's launch,
// so the wrapper's own processes never carry it), enters Command.Dir,
// starts the script as /bin/sh -c in a process group of its own (setsid,
// where the sandbox has it; a script over MaxArgScript is read from a
// here-document on fd 4, as no argv can hold it) and waits for it. It reports on stderr in records tagged with the nonce,
// "airlock-exec-<nonce>: <what>\n", which the host strips wherever they
// appear (RecordWriter):
//
//	no-dir              Command.Dir is missing; nothing ran
//	start PID group     the script runs as PID, leader of its own group
//	start PID nogroup   the script runs as PID in the wrapper's group
//	end STATUS [SIG]    the script ended: its exit status, and the signal's
//	                    name when one killed it
//
// and then exits 0, so that a client that exits otherwise after the end
// record failed itself. With a deadline, a watchdog inside the sandbox
// kills the script's group when it passes, whatever the host can still
// reach. Before the script starts, its bootstrap writes its pid, group
// mode and PID namespace to a file named by the run id (RunFile): the
// kill script (KillScript) finds the script by it when the start record
// never reached the host, and proves by it that a pid is the script's.
//
// The nonce travels on stdin only: it is in no argv, no environment and no
// file, so neither the script nor a nested call can produce a record by
// accident. A hostile sandbox can forge anything about itself, records
// included; what the host learns from them is the sandbox's word.

// ExecRecordPrefix starts every record of the wrapper; the nonce and ": "
// follow.
const ExecRecordPrefix = "airlock-exec-"

// MaxArgScript is the largest script that travels in the wrapper's argv;
// a larger one travels on stdin, after the nonce and before the
// environment.
const MaxArgScript = 64 << 10

// RunFile is the name of the file, in ${TMPDIR:-/tmp} of the sandbox, that
// holds the script's pid and group mode while it runs.
func RunFile(id string) string { return ".airlock-exec-" + id }

// ExecCall is what the host says about one call.
type ExecCall struct {
	Nonce    string // tags the records; [0-9a-z] only
	ID       string // names the run file; [0-9a-z] only
	Script   string
	Dir      string // "" for the sandbox's default
	Deadline int    // seconds the watchdog allows the script; 0: none
	Env      map[string]string
}

// ExecWrapper returns the text to run as `sh -c <text>` and the prelude to
// write on stdin ahead of the script's own input.
func ExecWrapper(c ExecCall) (wrapper, prelude string) {
	var pre strings.Builder
	pre.WriteString("__airlock_n=" + c.Nonce + "\n__airlock_i=" + c.ID + "\n")
	if c.Deadline > 0 {
		pre.WriteString("__airlock_d=" + strconv.Itoa(c.Deadline) + "\n")
	}
	var w strings.Builder
	w.WriteString("__airlock_d=\n")
	launch := `"$__airlock_c"`
	if len(c.Script) > MaxArgScript {
		pre.WriteString("__airlock_c=" + EnvQuote(c.Script) + "\n")
		launch = `'. /dev/fd/4' 4<<__airlock_E
$__airlock_c
__airlock_E
`
	} else {
		w.WriteString("__airlock_c=" + Quote(c.Script) + "\n")
	}
	pre.WriteString(EnvLines(c.Env))
	pre.WriteString(EnvEnd + "\n")
	w.WriteString(execEnvReader)
	w.WriteString(`__airlock_t="` + ExecRecordPrefix + `$__airlock_n:"` + "\n")
	if c.Dir != "" {
		fmt.Fprintf(&w, "cd %s 2>/dev/null || { printf '%%s no-dir\\n' \"$__airlock_t\" >&2; exit 0; }\n", Quote(c.Dir))
	}
	w.WriteString(strings.ReplaceAll(execSupervisor, "@LAUNCH@", launch))
	return w.String(), pre.String()
}

// execEnvReader reads the prelude (see EnvReader): the wrapper's own
// assignments are evaluated at once; the exports of Command.Env are kept
// for the script's launch, so that they reach the script and nothing of
// the wrapper's (its watchdog, its PATH and IFS) sees them. Stdin that
// ends before the terminator runs nothing and reports nothing.
const execEnvReader = `set -- '
'
__airlock_ok= __airlock_v=
while IFS= read -r __airlock_l; do
case $__airlock_l in
` + EnvEnd + `) __airlock_ok=1; break;;
export\ *) __airlock_v="$__airlock_v$__airlock_l$1";;
*) eval "$__airlock_l";;
esac
done
[ -n "$__airlock_ok" ] || exit 0
unset __airlock_l __airlock_ok; set --
`

// execSupervisor starts the script, its watchdog and the run file, waits,
// and writes the end record. Everything it needs from PATH (setsid,
// readlink) is found or run before Command.Env is exported, so an Env
// PATH of the caller's (even one naming nothing) cannot break the launch;
// the script itself then runs with that PATH. The TERM/HUP/INT trap stops the script's
// group when the engine signals the wrapper (sshd does on a closed
// session).
const execSupervisor = `exec 3<&0
__airlock_S=$(command -v setsid 2>/dev/null)
if [ -n "$__airlock_S" ]; then __airlock_g=group; else __airlock_g=nogroup; fi
__airlock_f="${TMPDIR:-/tmp}/.airlock-exec-$__airlock_i"
__airlock_ns=$(readlink /proc/self/ns/pid 2>/dev/null)
__airlock_b='(set -C; printf "%s %s %s\n" "$$" "$1" "$2" >"$0") 2>/dev/null; exec /bin/sh -c "$3"'
( set -- '
'; eval "$__airlock_v"; set --; [ $__airlock_g = nogroup ] || exec "$__airlock_S" /bin/sh -c "$__airlock_b" "$__airlock_f" group "$__airlock_ns" @LAUNCH@
exec /bin/sh -c "$__airlock_b" "$__airlock_f" nogroup "$__airlock_ns" @LAUNCH@
) <&3 3<&- &
__airlock_p=$!
if [ $__airlock_g = group ]; then __airlock_k=-$__airlock_p; else __airlock_k=$__airlock_p; fi
exec 3<&-
unset __airlock_v
trap 'kill -KILL $__airlock_k 2>/dev/null; exit 0' TERM HUP INT
printf '%s start %s %s\n' "$__airlock_t" "$__airlock_p" "$__airlock_g" >&2
__airlock_w=
if [ -n "$__airlock_d" ]; then
( trap 'kill "$__airlock_z" 2>/dev/null; exit 0' TERM
sleep "$__airlock_d" & __airlock_z=$!
wait "$__airlock_z" && kill -KILL $__airlock_k ) </dev/null >/dev/null 2>&1 &
__airlock_w=$!
fi
wait "$__airlock_p"
__airlock_s=$?
[ -z "$__airlock_w" ] || kill "$__airlock_w" 2>/dev/null
rm -f "$__airlock_f"
__airlock_x=
if [ "$__airlock_s" -gt 128 ] && [ "$__airlock_s" -lt 193 ]; then __airlock_x=$(kill -l "$__airlock_s" 2>/dev/null); fi
printf '%s end %s %s\n' "$__airlock_t" "$__airlock_s" "$__airlock_x" >&2
exit 0
`

// KillOutcome is what the kill script reports.
type KillOutcome int

const (
	KillUnknown     KillOutcome = iota // no answer, or one that does not parse
	KillGone                           // the script's group is gone (zombies aside)
	KillPidGone                        // the script is gone; it had no group of its own, so its children are unknown
	KillNotFound                       // no pid known and no run file: never started, or already ended and cleaned up
	KillAlive                          // still there after the kill
	KillUnconfirmed                    // killed by the host's pid, but no run file confirmed whose it is
	KillOtherNS                        // the run file is from another PID namespace: this exec cannot reach the command
)

// KillMark starts the kill script's answer line.
const KillMark = "airlock-exec-kill: "

// KillScript returns the sh text of the second exec that stops a call.
// The run file (written by the script's bootstrap: pid, group mode, PID
// namespace) is the proof of whose group a pid is: with it, the script's
// group is killed and waited for (up to about two seconds; a zombie
// counts as gone); from another PID namespace nothing is killed; without
// it, the pid and mode from the start record (when the host saw it; ""
// otherwise) are killed on trust and the result is unconfirmed. It answers
// one line, parsed by ParseKill.
func KillScript(id, pid, mode string) string {
	return fmt.Sprintf(`p=%s g=%s f="${TMPDIR:-/tmp}/.airlock-exec-%s" m=%s
i=0
while [ ! -r "$f" ] && [ $i -lt 10 ]; do sleep 0.05 2>/dev/null || sleep 1; i=$((i+1)); done
fp= fg= fn=
[ -r "$f" ] && { read -r fp fg fn <"$f" || :; }
me=$(readlink /proc/self/ns/pid 2>/dev/null)
if [ -n "$fp" ]; then
[ "$fn" = "$me" ] || { echo "${m}other-ns"; exit 0; }
p=$fp g=$fg
fi
case $p in ''|*[!0-9]*) echo "${m}not-found"; exit 0;; esac
case $g in group) k=-$p;; *) k=$p;; esac
kill -KILL $k 2>/dev/null
[ -n "$fp" ] || { echo "${m}unconfirmed"; exit 0; }
live() {
kill -0 $k 2>/dev/null || return 1
[ -r /proc/self/stat ] || return 0
for s in /proc/[0-9]*/stat; do
read -r l 2>/dev/null <"$s" || continue
set -- ${l##*) }
[ "$1" = Z ] && continue
if [ "$g" = group ]; then [ "$3" = "$p" ] && return 0; else [ "${s#/proc/}" = "$p/stat" ] && return 0; fi
done
return 1
}
i=0
while live; do
i=$((i+1)); [ $i -gt 40 ] && { echo "${m}alive"; exit 0; }
sleep 0.05 2>/dev/null || sleep 1
done
rm -f "$f"
if [ "$g" = group ]; then echo "${m}gone"; else echo "${m}pid-gone"; fi
`, Quote(pid), Quote(mode), id, Quote(KillMark))
}

// ParseKill reads the kill script's answer from its stdout.
func ParseKill(out []byte) KillOutcome {
	line, _, _ := bytes.Cut(out, []byte("\n"))
	switch string(bytes.TrimPrefix(line, []byte(KillMark))) {
	case "gone":
		return KillGone
	case "pid-gone":
		return KillPidGone
	case "not-found":
		return KillNotFound
	case "alive":
		return KillAlive
	case "unconfirmed":
		return KillUnconfirmed
	case "other-ns":
		return KillOtherNS
	}
	return KillUnknown
}

// maxRecord bounds one record after its tag: a longer one is not the
// wrapper's (it breaks the protocol), and it is passed on as output.
const maxRecord = 64

// ExecRecords is what the wrapper reported.
type ExecRecords struct {
	NoDir   bool
	Started bool
	Pid     string // the script's pid, digits
	Group   string // "group" or "nogroup"
	Ended   bool
	Status  int
	Signal  string // "" unless a signal killed the script
	// Broken says why the records tagged with the call's nonce break the
	// protocol, "" when they do not: one that does not parse or is longer
	// than its bound, or one out of the wrapper's order (no-dir alone, or
	// start and then end, each once: a second end, a start after the
	// end). Only the wrapper knows the nonce, so the sandbox is broken or
	// hostile. The first of each record counts; the rest is ignored.
	Broken string
}

// RecordWriter passes stderr on to W byte-exact, less the records tagged
// with Nonce (see ExecWrapper), wherever they appear; it holds back at
// most a tag's length of bytes that might start one, until the next write
// or Flush. A tagged line that does not parse is passed on, and so are
// the tag and what follows it when no newline comes within the bound of a
// record; either breaks the protocol (ExecRecords.Broken), and so does a
// record out of order (dropped). A tagged record cut off by the end of
// the stream is no record, unless the end record came before it (then it
// breaks the protocol). It is safe for concurrent use.
type RecordWriter struct {
	W     io.Writer // nil: discard
	tag   []byte
	mu    sync.Mutex
	held  []byte
	rec   ExecRecords
	wrErr error
	tail  []byte // the last bytes passed on, for error messages
}

// tailMax bounds RecordWriter.Tail.
const tailMax = 256

// NewRecordWriter returns a RecordWriter for the records tagged with nonce.
func NewRecordWriter(nonce string, w io.Writer) *RecordWriter {
	return &RecordWriter{W: w, tag: []byte(ExecRecordPrefix + nonce + ": ")}
}

// Write implements io.Writer. It never fails: an error of W is kept
// (Err) and the rest discarded, so that the records are still read.
func (r *RecordWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	buf := append(r.held, p...)
	r.held = nil
	for len(buf) > 0 {
		i := bytes.Index(buf, r.tag)
		if i < 0 {
			keep := partialPrefix(buf, r.tag)
			r.emit(buf[:len(buf)-keep])
			r.held = append([]byte(nil), buf[len(buf)-keep:]...)
			break
		}
		r.emit(buf[:i])
		rest := buf[i+len(r.tag):]
		j := bytes.IndexByte(rest[:min(len(rest), maxRecord+1)], '\n')
		if j < 0 && len(rest) <= maxRecord {
			r.held = append([]byte(nil), buf[i:]...) // the record's end is still to come
			break
		}
		if j < 0 {
			r.broke(fmt.Sprintf("a record longer than %d bytes", maxRecord))
		}
		if j < 0 || !r.parse(string(rest[:j])) {
			r.emit(buf[i : i+len(r.tag)]) // not a record: output
			buf = rest
			continue
		}
		buf = rest[j+1:]
	}
	return len(p), nil
}

// partialPrefix returns the length of the longest suffix of b that is a
// proper prefix of tag.
func partialPrefix(b, tag []byte) int {
	for n := min(len(b), len(tag)-1); n > 0; n-- {
		if bytes.HasSuffix(b, tag[:n]) {
			return n
		}
	}
	return 0
}

func (r *RecordWriter) emit(p []byte) {
	if len(p) == 0 {
		return
	}
	r.tail = append(r.tail, p[max(0, len(p)-tailMax):]...)
	r.tail = r.tail[max(0, len(r.tail)-tailMax):]
	if r.W == nil || r.wrErr != nil {
		return
	}
	if _, err := r.W.Write(p); err != nil {
		r.wrErr = err
	}
}

// parse reads one record, line, the text after its tag; false when it
// does not parse (which breaks the protocol). A record out of the
// wrapper's order (no-dir alone; start, then end; each once) is dropped
// and breaks the protocol.
func (r *RecordWriter) parse(line string) bool {
	f := strings.Split(line, " ")
	first := !r.rec.NoDir && !r.rec.Started // Ended implies Started
	switch {
	case len(f) == 1 && f[0] == "no-dir":
		if !first {
			r.broke("a no-dir record after another record")
			break
		}
		r.rec.NoDir = true
	case len(f) == 3 && f[0] == "start" && digits(f[1]) && (f[2] == "group" || f[2] == "nogroup"):
		if !first {
			r.broke("a start record after another record")
			break
		}
		r.rec.Started, r.rec.Pid, r.rec.Group = true, f[1], f[2]
	case len(f) == 3 && f[0] == "end" && digits(f[1]) && len(f[1]) <= 3 && signalWord(f[2]):
		switch {
		case r.rec.Ended:
			r.broke(fmt.Sprintf("a second end record %q", line))
		case !r.rec.Started:
			r.broke(fmt.Sprintf("an end record %q without a start record", line))
		default:
			st, _ := strconv.Atoi(f[1])
			r.rec.Ended, r.rec.Status, r.rec.Signal = true, st, f[2]
		}
	default:
		r.broke(fmt.Sprintf("the record %q does not parse", line))
		return false
	}
	return true
}

// broke records the first reason the records break the protocol.
func (r *RecordWriter) broke(why string) {
	if r.rec.Broken == "" {
		r.rec.Broken = why
	}
}

// signalWord reports whether s may be a signal's name as kill -l prints
// it ("" when none killed the script).
func signalWord(s string) bool {
	if len(s) > 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < 'A' || s[i] > 'Z') && (s[i] < '0' || s[i] > '9') && s[i] != '+' && s[i] != '-' {
			return false
		}
	}
	return true
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Flush passes on what was held back (the stream ended: it was no
// record).
func (r *RecordWriter) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if bytes.HasPrefix(r.held, r.tag) && (r.rec.Ended || r.rec.NoDir) {
		// Nothing follows the last record but the wrapper's exit.
		r.broke("a record cut off after the last record")
	}
	r.emit(r.held)
	r.held = nil
}

// Records returns what the wrapper reported so far.
func (r *RecordWriter) Records() ExecRecords {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec
}

// Tail returns the last bytes (at most 256) passed on: what an exec
// client that failed said last.
func (r *RecordWriter) Tail() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.tail)
}

// Err returns the first error of W.
func (r *RecordWriter) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wrErr
}
