package shell

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// The agent-process protocol (sandbox.Start, sandbox.Process): a wrapper
// script starts the agent's command as the leader of a session and process
// group of its own, tagged by an environment variable every descendant
// inherits; the leader reports itself in one header line on stdout before
// the command runs; signal scripts, run later as separate commands, find the
// group's, the session's and the tagged processes by scanning /proc and
// signal them.
const (
	// ProcessTagVar is the environment variable that tags every process of
	// an agent process: ProcessTagVar=<tag>, inherited by every descendant
	// that does not clear its environment.
	ProcessTagVar = "AIRLOCK_PROCESS"
	// MaxProcessHeader bounds the header line, its newline included.
	MaxProcessHeader = 128
	// MaxProcessReply bounds what a signal script prints.
	MaxProcessReply = 256

	processMagic = "airlock-process-v1"
	maxPID       = 1<<31 - 1
)

// ValidProcessTag reports whether tag can tag a process: 32 lowercase hex
// digits (what sandbox.Start generates), so that it needs no quoting and
// cannot be a prefix of another tag.
func ValidProcessTag(tag string) bool {
	if len(tag) != 32 {
		return false
	}
	for i := 0; i < len(tag); i++ {
		if c := tag[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// processLeader runs as the first process of the new session ($1: the
// command's script). It reads its own process group and session from
// /proc and its PID namespace from /proc/$$/ns/pid, and prints the header:
// the group and the session only when it leads them ("-" otherwise, or
// where /proc does not say), the namespace "-" where it cannot be read.
// Then it becomes the command's shell.
const processLeader = `__airlock_c=$1; __airlock_g=-; __airlock_d=-; __airlock_n=-
if { read -r __airlock_s < /proc/$$/stat; } 2>/dev/null; then
__airlock_s=${__airlock_s##*) }
set -- $__airlock_s
[ "$3" = "$$" ] && __airlock_g=$3
[ "$4" = "$$" ] && __airlock_d=$4
fi
__airlock_s=$(readlink /proc/$$/ns/pid 2>/dev/null) || __airlock_s=
case $__airlock_s in 'pid:['*']') __airlock_n=$__airlock_s;; esac
printf '` + processMagic + ` %s %s %s %s %s\n' "$` + ProcessTagVar + `" "$$" "$__airlock_g" "$__airlock_d" "$__airlock_n"
unset __airlock_s __airlock_g __airlock_d __airlock_n
exec /bin/sh -c "$__airlock_c"
`

// ProcessWrapper returns the script that runs script as an agent process
// tagged with tag (see ValidProcessTag).
//
// The command runs in a new session (setsid, from util-linux or busybox),
// or, where there is no setsid, in a process group of its own made by job
// control (set -m, which bash honours without a terminal; dash and busybox
// sh do not, and the command then shares the wrapper's group: the header
// says so and only the tag finds it). The leader, already in its session,
// writes the header line
//
//	airlock-process-v1 TAG PID PGID SID NS
//
// to stdout before the command's first byte: PGID and SID are its pid when
// it leads its group and session, "-" when it does not or /proc does not
// say; NS is its PID namespace ("pid:[4026531836]"), "-" when it cannot be
// read. Everything after it is the command's stdout, byte for byte. The
// wrapper's stdin is the command's; the wrapper then waits for the leader
// and exits with its status, re-raising the signal that killed it, so the
// Runner reports the command's own end. script travels in the wrapper's
// text and the leader's argv: keep it small (sandbox bounds it).
func ProcessWrapper(tag, script string) string {
	if !ValidProcessTag(tag) {
		panic("shell: invalid process tag " + strconv.Quote(tag))
	}
	start := ProcessTagVar + "=" + tag + ` %s/bin/sh -c "$__airlock_l" sh "$__airlock_c" <&3 3<&- &`
	var b strings.Builder
	b.WriteString("__airlock_c=" + Quote(script) + "\n")
	b.WriteString("__airlock_l=" + Quote(processLeader) + "\n")
	b.WriteString("exec 3<&0\n")
	b.WriteString("if command -v setsid >/dev/null 2>&1; then\n")
	b.WriteString(fmt.Sprintf(start, "setsid ") + "\n")
	b.WriteString("else\nset -m 2>/dev/null\n" + fmt.Sprintf(start, "") + "\nset +m 2>/dev/null\nfi\n")
	b.WriteString(`__airlock_p=$!
exec 3<&- 0</dev/null
unset __airlock_c __airlock_l
wait "$__airlock_p"
__airlock_s=$?
if [ "$__airlock_s" -gt 128 ] && [ "$__airlock_s" -lt 193 ]; then kill -s "$(kill -l "$__airlock_s")" $$ 2>/dev/null; fi
exit "$__airlock_s"
`)
	return b.String()
}

// ProcessHeader is what the header line says of an agent process.
type ProcessHeader struct {
	PID     int    // the leader's pid (>= 2)
	Group   int    // the process group the command leads (its PID), or -1 when it has none of its own or /proc did not say
	Session int    // the session the command leads (its PID), or -1 likewise
	NS      string // the leader's PID namespace, as readlink /proc/PID/ns/pid prints it ("pid:[N]"), or "" when unknown
}

// ParseProcessHeader parses line, the header without its newline, of the
// process tagged tag. Anything but the exact form is an error wrapping
// ErrProtocol: a line of up to MaxProcessHeader bytes, the tag, a pid from
// 2 to 2^31-1, a group and a session that are the pid or "-", and a PID
// namespace "pid:[N]" or "-" (a header without it, the form before it was
// added, is read as "-"). The leader is the first process of a session
// (setsid: pid, group and session are one) or of a group (job control: pid
// and group are one), and it reports "-" for what it does not lead; a
// header naming another group or session, or a session without its group,
// is impossible: a forgery, refused rather than aimed at.
func ParseProcessHeader(line []byte, tag string) (ProcessHeader, error) {
	bad := func(why string) (ProcessHeader, error) {
		return ProcessHeader{}, fmt.Errorf("%w: the process header %q %s", ErrProtocol, Truncate(string(line), MaxProcessHeader), why)
	}
	if len(line) >= MaxProcessHeader {
		return bad(fmt.Sprintf("is longer than %d bytes", MaxProcessHeader-1))
	}
	f := strings.Split(string(line), " ")
	if (len(f) != 5 && len(f) != 6) || f[0] != processMagic {
		return bad("is not \"" + processMagic + " TAG PID PGID SID NS\"")
	}
	if f[1] != tag {
		return bad("names another process's tag")
	}
	pid, ok := parseID(f[2])
	if !ok || pid < 2 {
		return bad("has no valid pid (2 to 2^31-1)")
	}
	h := ProcessHeader{PID: pid, Group: -1, Session: -1}
	for i, p := range []*int{&h.Group, &h.Session} {
		switch f[3+i] {
		case "-":
		case f[2]:
			*p = pid
		default:
			return bad("names a process group or session other than its pid: the leader reports only the group and session it leads")
		}
	}
	if h.Session == pid && h.Group != pid {
		return bad("names a session the process leads without its group: a session leader leads its group")
	}
	if len(f) == 6 && f[5] != "-" {
		if !validPIDNamespace(f[5]) {
			return bad("has an invalid PID namespace (pid:[N] or -)")
		}
		h.NS = f[5]
	}
	return h, nil
}

// validPIDNamespace reports whether ns reads as readlink /proc/PID/ns/pid
// prints a PID namespace: pid:[N], N decimal.
func validPIDNamespace(ns string) bool {
	n, pre := strings.CutPrefix(ns, "pid:[")
	n, post := strings.CutSuffix(n, "]")
	if !pre || !post || n == "" || len(n) > 20 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}

// parseID parses a decimal pid: digits only, no sign, at most maxPID.
func parseID(s string) (int, bool) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxPID {
		return 0, false
	}
	return int(n), true
}

// processSignal finds the members of the agent process (live processes of
// the group __g or the session __s, and processes tagged __t, found with
// grep -z over /proc/*/environ) and signals them with __k: each member once
// for TERM, every round for KILL, members that appear later too. It stops
// as soon as none is left ("gone") or after __n rounds of a tenth of a
// second (a second where sleep takes whole seconds only) and then reports
// how many are left. Zombies are not members: they run nothing. Without
// /proc it signals the group of the leader __p and reports "noproc". When
// the leader's PID namespace __ns is known and is not this script's (each
// exec a sandbox of its own, as bwrap --unshare-pid makes), its pids name
// other processes here: it signals nothing and reports "otherns".
const processSignal = `if [ "$__ns" != - ] && [ "$(readlink /proc/self/ns/pid 2>/dev/null)" != "$__ns" ]; then
echo "$__r otherns"; exit 0
fi
if ! { read -r __l < /proc/self/stat; } 2>/dev/null; then
[ "$__p" -gt 1 ] && kill -$__k -$__p 2>/dev/null
echo "$__r noproc"; exit 0
fi
__tk=0.1 __sent=' ' __i=0
while :; do
__m=' '
for __d in /proc/[0-9]*; do
{ read -r __l < "$__d/stat"; } 2>/dev/null || continue
__l=${__l##*) }
set -- $__l
case $1 in Z|X|x) continue;; esac
[ "$3" = "$__g" ] || [ "$4" = "$__s" ] || continue
__m="$__m${__d#/proc/} "
done
for __f in $(grep -lszxF -e "$__t" /proc/[0-9]*/environ 2>/dev/null); do
__f=${__f#/proc/}; __f=${__f%/environ}
case $__m in *" $__f "*) ;; *) __m="$__m$__f ";; esac
done
[ "$__m" = ' ' ] && { echo "$__r gone"; exit 0; }
[ "$__i" -ge "$__n" ] && break
for __f in $__m; do
case $__sent in *" $__f "*) [ "$__k" = KILL ] || continue;; *) __sent="$__sent$__f ";; esac
kill -$__k "$__f" 2>/dev/null
done
sleep $__tk 2>/dev/null || { [ "$__tk" = 1 ] || __n=$(( (__n - __i + 9) / 10 + __i )); __tk=1; sleep 1; }
__i=$((__i + 1))
done
set -- $__m
echo "$__r left $#"
`

// ProcessSignal returns the script that signals every process of the agent
// process tagged tag whose header was h (h.PID 0, Group and Session -1 when
// no header arrived: then the tag alone finds them) with sig ("TERM" or
// "KILL") and waits up to rounds tenths of a second for them to be gone.
// A script that runs in another PID namespace than h.NS signals nothing.
// Its stdout is one reply line for ParseProcessReply.
func ProcessSignal(tag string, h ProcessHeader, sig string, rounds int) string {
	if !ValidProcessTag(tag) {
		panic("shell: invalid process tag " + strconv.Quote(tag))
	}
	if sig != "TERM" && sig != "KILL" {
		panic("shell: ProcessSignal: signal " + strconv.Quote(sig))
	}
	ns := "-"
	if validPIDNamespace(h.NS) {
		ns = h.NS
	}
	return fmt.Sprintf("__t=%s __r=%s __k=%s __p=%d __g=%d __s=%d __ns=%s __n=%d\n", ProcessTagVar+"="+tag, processMagic+"-"+tag, sig, max(h.PID, 0), h.Group, h.Session, Quote(ns), max(rounds, 0)) + processSignal
}

// ProcessReply is what a signal script reports.
type ProcessReply struct {
	Gone   bool // no process of the agent process is left
	Left   int  // how many are left, when not Gone
	NoProc bool // the sandbox has no /proc: nothing could be checked
	// OtherNS: the script ran in another PID namespace than the leader:
	// it could neither see nor signal the processes (nothing was sent).
	OtherNS bool
}

// ParseProcessReply parses the output of ProcessSignal's script for tag.
// Anything but exactly one reply line is an error wrapping ErrProtocol.
func ParseProcessReply(out []byte, tag string) (ProcessReply, error) {
	line, ok := bytes.CutSuffix(out, []byte("\n"))
	rest, tagged := bytes.CutPrefix(line, []byte(processMagic+"-"+tag+" "))
	if !ok || !tagged || len(out) > MaxProcessReply || bytes.ContainsRune(line, '\n') {
		return ProcessReply{}, fmt.Errorf("%w: the reply of the process signal script %q is not one %q line", ErrProtocol, Truncate(string(out), MaxProcessReply), processMagic+"-TAG gone|left N|noproc|otherns")
	}
	switch s := string(rest); {
	case s == "gone":
		return ProcessReply{Gone: true}, nil
	case s == "noproc":
		return ProcessReply{NoProc: true}, nil
	case s == "otherns":
		return ProcessReply{OtherNS: true}, nil
	case strings.HasPrefix(s, "left "):
		if n, ok := parseID(s[len("left "):]); ok && n > 0 {
			return ProcessReply{Left: n}, nil
		}
	}
	return ProcessReply{}, fmt.Errorf("%w: the reply of the process signal script %q is not \"gone\", \"left N\", \"noproc\" or \"otherns\"", ErrProtocol, Truncate(string(out), MaxProcessReply))
}
