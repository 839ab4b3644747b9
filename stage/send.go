package stage

import (
	"fmt"
	"sort"
	"strings"
)

// One publish over a shell target runs two sandbox commands: the send
// command (setup, carry, transfer) and the publish (a control operation);
// phases.go runs them, and internal/shell holds the lines they print
// (shell.ReadyLine, shell.CarriedLine, shell.PublishedLine) and their
// parser (shell.Report). The host waits for shell.ReadyLine under the
// control deadline, exactly as it waited for the separate setup command it
// replaces, so a sandbox that never answers is still a transport failure
// within the deadline; once the directory exists the command is a data
// command, bounded by the caller's context only.

// maxEmbeddedCarry bounds the carry part of a send command's script (the
// quoted names of the unchanged files). A longer list is carried by a
// command of its own, which reads its script on stdin, while the send
// command waits for the stream.
var maxEmbeddedCarry = 64 << 10 // a variable so that tests can lower it

// carryFuncs defines the carry's shell functions. H hashes its arguments
// (openssl when the sandbox has it, which is several times faster than
// most sha256sum builds, else sha256sum; both print "<hex> <flag><path>").
// C MODE NAMES... copies NAMES from the previous copy (the working
// directory) into $n with tar, drops whatever arrived that is not a
// regular file, sets the manifest's MODE and hashes the rest. Errors are
// not fatal: a file whose hash is not reported is sent.
const carryFuncs = `H() { if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256 -r "$@"; else sha256sum -- "$@"; fi; }
C() { m=$1; shift
tar -c -f - -- "$@" 2>/dev/null | (cd "$n" && tar -x -o -f - 2>/dev/null)
(cd "$n" && for f; do if [ -L "$f" ] || { [ -e "$f" ] && [ ! -f "$f" ]; }; then rm -rf -- "$f"; fi; done; chmod "$m" -- "$@"; H "$@") 2>/dev/null; }
`

// carryPlan is the carry part of a publish: the files to copy inside the
// sandbox, as calls of C in batches, and the hash each must have.
type carryPlan struct {
	calls []string          // "C 644 'a' 'b'"; each under maxCarryArgs bytes
	want  map[string]string // path → lowercase hex SHA-256
	size  int               // bytes of calls
}

// planCarry plans carrying files. Files whose names the hash tools would
// print escaped, or that tar would read as options, are left out (sent).
func planCarry(files []UnchangedFile) carryPlan {
	p := carryPlan{want: make(map[string]string, len(files))}
	byMode := make(map[string][]string)
	var modes []string
	for _, f := range files {
		if strings.ContainsAny(f.Path, "\\\n\r") || strings.HasPrefix(f.Path, "-") {
			continue
		}
		m := fmt.Sprintf("%o", f.Mode.Perm())
		if _, ok := byMode[m]; !ok {
			modes = append(modes, m)
		}
		byMode[m] = append(byMode[m], qa(f.Path))
		p.want[f.Path] = f.SHA256
	}
	sort.Strings(modes)
	for _, m := range modes {
		var sb strings.Builder
		flush := func() {
			if sb.Len() > 0 {
				p.calls = append(p.calls, sb.String())
				p.size += sb.Len() + 1
				sb.Reset()
			}
		}
		for _, a := range byMode[m] {
			if sb.Len() > 0 && sb.Len()+1+len(a) > maxCarryArgs {
				flush()
			}
			if sb.Len() == 0 {
				sb.WriteString("C " + m)
			}
			sb.WriteString(" " + a)
		}
		flush()
	}
	return p
}

// qa quotes p as one shell word, leaving a name of only safe characters
// bare: a carry names thousands of files, and its script may be quoted
// again by a Runner (remote.Host quotes it twice), which multiplies every
// quote.
func qa(p string) string {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._/-+,@%:", c) >= 0) {
			return q(p)
		}
	}
	if p == "" || p[0] == '-' {
		return q(p)
	}
	return p
}

// script returns the carry as shell lines: from the previous copy dst into
// n, reporting the hashes, then the end marker. It leaves the working
// directory where it found it.
func (p carryPlan) script(n, dst string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "n=%s\nif [ \"$ah\" = 1 ] && mkdir -p \"$n\" && cd %s 2>/dev/null; then\n", q(n), q(dst))
	sb.WriteString(carryFuncs)
	for _, c := range p.calls {
		sb.WriteString(c)
		sb.WriteByte('\n')
	}
	sb.WriteString("cd / || exit 1\nfi\n")
	return sb.String()
}
