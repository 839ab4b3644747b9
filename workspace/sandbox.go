package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/airlockdev/airlock/internal/gitexec"
	"github.com/airlockdev/airlock/internal/shell"
	"github.com/airlockdev/airlock/sandbox"
)

// guestPrelude starts every sandbox script that runs git: the sandbox's
// own GIT_* redirections are dropped, system and global configuration
// ignored, hooks off, no prompt.
const guestPrelude = `unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_NAMESPACE GIT_COMMON_DIR GIT_CEILING_DIRECTORIES GIT_CONFIG GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT GIT_EXEC_PATH GIT_TEMPLATE_DIR GIT_SSH GIT_SSH_COMMAND GIT_EXTERNAL_DIFF GIT_PAGER GIT_EDITOR GIT_QUARANTINE_PATH GIT_REPLACE_REF_BASE GIT_NO_REPLACE_OBJECTS GIT_GRAFT_FILE GIT_SHALLOW_FILE GIT_DISCOVERY_ACROSS_FILESYSTEM GIT_LITERAL_PATHSPECS GIT_GLOB_PATHSPECS GIT_NOGLOB_PATHSPECS GIT_ICASE_PATHSPECS GIT_TRACE 2>/dev/null
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0 GIT_OPTIONAL_LOCKS=0 LC_ALL=C
g() { git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c gc.auto=0 -c maintenance.auto=false -c core.autocrlf=false -c core.quotePath=false "$@"; }
`

// sandboxRepair makes the sandbox's repository usable, whatever an
// earlier Prepare cut short left (it runs in the work tree, after the
// check that .git is not a link or a file): a missing or incomplete .git
// (an init cut short: no HEAD, objects or refs) is completed by git init,
// which creates what is missing and overwrites nothing; lock files and
// half-written packs (objects/pack/tmp_*) of a killed git, the scratch
// files of an earlier round and the refs whose
// object is missing (an objects directory emptied or cut short) are
// removed (Prepare owns the sandbox repository while it runs). A repository git
// still cannot open is a clear error (exit 12). Then GIT_DIR pins every
// git command to this repository (never one above it), the runtime
// directory is ignored through .git/info/exclude (appended once; the
// lines there stay).
const sandboxRepair = `usable() { GIT_DIR=.git g rev-parse --git-dir >/dev/null 2>&1; }
rm -f .git/airlock-prepare-* .git/airlock-restore-* 2>/dev/null
if [ -d .git ]; then
  if command -v find >/dev/null 2>&1; then find .git -path .git/objects -prune -o -name '*.lock' -type f -exec rm -f {} + 2>/dev/null
  else rm -f .git/*.lock .git/refs/heads/*.lock 2>/dev/null; fi
  rm -f .git/objects/pack/tmp_pack_* .git/objects/pack/tmp_idx_* .git/objects/pack/tmp_rev_* 2>/dev/null
fi
if ! usable; then
  e=$(g init -q . 2>&1 >/dev/null)
  usable || { echo "the sandbox repository $r/.git is damaged and git init cannot repair it ($e); remove $r/.git and prepare again" >&2; exit 12; }
fi
export GIT_DIR=.git
g for-each-ref --format='%(refname)' 2>/dev/null | g cat-file --batch-check 2>/dev/null | while read -r n m; do if [ "$m" = missing ]; then g update-ref -d "$n" >/dev/null 2>&1; fi; done
mkdir -p .git/info || { echo "cannot create $r/.git/info; remove $r/.git and prepare again" >&2; exit 12; }
has=
if [ -f .git/info/exclude ]; then while IFS= read -r l || [ -n "$l" ]; do [ "$l" = /` + sandbox.RuntimeDir + ` ] && has=1; done < .git/info/exclude; fi
if [ -z "$has" ]; then printf '\n# airlock: the runtime directory\n/` + sandbox.RuntimeDir + `\n' >> .git/info/exclude || { echo "cannot write $r/.git/info/exclude" >&2; exit 12; }; fi`

// findReport is the sandbox's list of entries that no tar header or git
// tree can be trusted to show, one record <type><./path>NUL each:
//   - h: a regular file with more than one link (refused);
//   - u: a regular file with a setuid, setgid or sticky bit (written
//     without those bits, and listed in Result.Refused);
//   - s: a FIFO, socket or device (refused);
//   - n: an entry named .git below the top (a nested repository, which a
//     git sandbox's add and ls-files never show; refused, and nothing
//     below it is looked at);
//   - r: an entry at the top of the runtime directory, or the runtime
//     directory itself when it is not a directory (never restored, listed
//     in Result.Refused).
//
// It runs in the sandbox work tree; $rep names the file the report is
// written to, which is left out of it. The walk is find's when the sandbox
// has find, else shellWalk's, which needs only sh and ls.
const findReport = `{ if command -v find >/dev/null 2>&1; then find . \( -path ./.git -o -path ./` + sandbox.RuntimeDir + ` \) -prune -o -name .git -prune -exec printf 'n%s\0' {} + -o -type f -links +1 -exec printf 'h%s\0' {} + -o -type f \( -perm -4000 -o -perm -2000 -o -perm -1000 \) -exec printf 'u%s\0' {} + -o ! -type f ! -type d ! -type l -exec printf 's%s\0' {} +
else ` + shellWalk + `
fi
rt=./` + sandbox.RuntimeDir + `
if [ -L "$rt" ] || { [ -e "$rt" ] && [ ! -d "$rt" ]; }; then printf 'r%s\0' "$rt"
elif [ -d "$rt" ]; then for f in "$rt"/* "$rt"/.[!.]* "$rt"/..?*; do if { [ -e "$f" ] || [ -L "$f" ]; } && [ "$f" != "$rep" ]; then printf 'r%s\0' "$f"; fi; done
fi; }`

// shellWalk writes the n, h, u and s records of findReport without find: a
// recursive sh function over globs (links are never followed, .git and the
// runtime directory skipped), the type and mode tests of test(1), and the
// link count from ls -ln, read once a directory and per file only in a
// directory that holds a regular file with more than one link. ls -q keeps
// every name on one line; set -f keeps a name's glob characters literal.
const shellWalk = `aln() ( set -f; set -- $(ls -ldn -- "$1" 2>/dev/null); echo "${2:-1}" )
aw() {
  set -- "$1" "$(ls -lnqA -- "$1" 2>/dev/null | while read -r m n x; do case $m in -*) [ "$n" = 1 ] || { echo y; break; };; esac; done)"
  for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    case $f in ./.git) ;; */.git) printf 'n%s\0' "$f"; continue ;; esac
    if [ -L "$f" ] || [ ! -e "$f" ]; then continue; fi
    if [ -d "$f" ]; then case $f in ./.git|./` + sandbox.RuntimeDir + `) ;; *) aw "$f" ;; esac
    elif [ -f "$f" ]; then
      if [ -n "$2" ] && [ "$(aln "$f")" != 1 ]; then printf 'h%s\0' "$f"
      elif [ -u "$f" ] || [ -g "$f" ] || [ -k "$f" ]; then printf 'u%s\0' "$f"; fi
    else printf 's%s\0' "$f"
    fi
  done
}
aw .`

// q quotes s for POSIX sh.
func q(s string) string { return shell.Quote(s) }

// probe is what the sandbox said about itself.
type probe struct {
	tools      map[string]bool
	gitVersion string   // "git version …" or ""
	have       []string // commit names the sandbox repo holds (refs and HEAD)
}

// maxProbeHave bounds the commits a probe may list.
const maxProbeHave = 2000

func probeScript(remote string) string {
	return fmt.Sprintf(`r=%s
for t in git tar; do if command -v "$t" >/dev/null 2>&1; then echo "tool $t"; fi; done
if command -v git >/dev/null 2>&1; then v=$(git --version 2>/dev/null) && echo "gitversion $v"; fi
if [ -d "$r/.git" ] && [ ! -L "$r/.git" ] && cd "$r" 2>/dev/null; then
%s
export GIT_DIR=.git
{ g for-each-ref --count=%d --format='%%(objectname)' refs/airlock/base refs/heads; g rev-parse -q --verify 'HEAD^{commit}'; } 2>/dev/null | g cat-file --batch-check='%%(objecttype) %%(objectname)' 2>/dev/null | while read -r t n; do [ "$t" = commit ] && echo "have $n"; done
fi
echo end
`, q(remote), guestPrelude, maxProbeHave-1)
}

// parseProbe reads a probe's output. It accepts only the lines the probe
// script writes and requires the final "end" line.
func parseProbe(data []byte) (probe, error) {
	p := probe{tools: map[string]bool{}}
	lines := strings.Split(string(data), "\n")
	if len(lines) < 2 || lines[len(lines)-1] != "" || lines[len(lines)-2] != "end" {
		return probe{}, fmt.Errorf("%w: the sandbox probe did not end with its end line", ErrHostile)
	}
	for _, l := range lines[:len(lines)-2] {
		k, v, _ := strings.Cut(l, " ")
		switch k {
		case "tool":
			if v != "git" && v != "tar" {
				return probe{}, fmt.Errorf("%w: the sandbox probe names an unknown tool %q", ErrHostile, v)
			}
			p.tools[v] = true
		case "gitversion":
			if p.gitVersion != "" || len(v) > 200 {
				return probe{}, fmt.Errorf("%w: the sandbox probe has a bad git version line", ErrHostile)
			}
			p.gitVersion = v
		case "have":
			if !isHex(v) {
				return probe{}, fmt.Errorf("%w: the sandbox probe lists %q, not an object name", ErrHostile, v)
			}
			if len(p.have) >= maxProbeHave {
				return probe{}, fmt.Errorf("%w: the sandbox probe lists more than %d commits", ErrHostile, maxProbeHave)
			}
			p.have = append(p.have, v)
		default:
			return probe{}, fmt.Errorf("%w: unexpected sandbox probe line %.80q", ErrHostile, l)
		}
	}
	return p, nil
}

// probe runs the probe as a control operation (bounded by the control
// deadline even when the Runner ignores its context).
func (r *Round) probe(ctx context.Context) (probe, error) {
	var out bytes.Buffer
	lw := &limitWriter{w: &out, n: 1 << 20}
	// The Bridge's control deadline is the Runner's own when it has one
	// (sandbox.ControlDeadline).
	err := sandbox.Control(ctx, r.spec.Runner, sandbox.Command{Script: probeScript(r.spec.Remote), Stdout: lw})
	if lw.over {
		// The host stopped reading at the limit: that is the reason,
		// whatever the command's end (a broken pipe) says.
		return probe{}, fmt.Errorf("%w: the sandbox probe wrote more than 1 MiB", ErrHostile)
	}
	if err != nil {
		return probe{}, fmt.Errorf("workspace: probing the sandbox at %s: %w", r.spec.Remote, err)
	}
	return parseProbe(out.Bytes())
}

// checkTools fails, naming the tool, when the sandbox lacks one.
func (p probe) checkTools(git bool) error {
	need := []string{"tar"}
	if git {
		need = []string{"git"}
	}
	for _, t := range need {
		if !p.tools[t] {
			return &ToolError{Tool: t, Where: "sandbox"}
		}
	}
	if git {
		maj, min, ok := gitexec.ParseVersion(p.gitVersion)
		if !ok || maj < minGuestGitMajor || (maj == minGuestGitMajor && min < minGuestGitMinor) {
			return &ToolError{Tool: "git", Where: "sandbox", Have: strings.TrimPrefix(p.gitVersion, "git version "), Need: fmt.Sprintf("%d.%d", minGuestGitMajor, minGuestGitMinor)}
		}
	}
	return nil
}

// guestStopGrace is how long a cancelled guest command's Runner gets to
// return before it is abandoned.
const guestStopGrace = 500 * time.Millisecond

// runGuest runs a data command (bounded by ctx only) and maps its failure:
// an exit status becomes an error carrying the script's stderr; anything
// else wraps sandbox.ErrTransport. The script reports its end (sandbox.Watch,
// ArmAtEnd): from then on the Runner must return within the control
// deadline (sandbox.ControlDeadline), or the command is abandoned, expire
// (when not nil) runs with the error, which wraps sandbox.ErrTransport, and
// so does runGuest's.
func runGuest(ctx context.Context, run sandbox.Runner, op string, cmd sandbox.Command, expire func(error)) error {
	stderr := &shell.LimitedBuffer{Max: 4 << 10, Truncate: true}
	cmd.Stderr = stderr
	x := sandbox.Watch(ctx, run, cmd, sandbox.WatchOptions{Op: op, ArmAtEnd: true, OnExpire: expire})
	var err error
	select {
	case <-x.Done():
		err = x.Err()
	case <-x.Expired():
		err = x.TimeoutErr()
	case <-ctx.Done():
		// A Runner that ignores its context gets a short grace, then is
		// abandoned.
		t := time.NewTimer(guestStopGrace)
		defer t.Stop()
		select {
		case <-x.Done():
			err = x.Err()
		case <-x.Expired():
			err = x.TimeoutErr()
		case <-t.C:
			return fmt.Errorf("workspace: %s: %w (%w: the sandbox command did not end within %s of being stopped and was abandoned)", op, ctx.Err(), sandbox.ErrTransport, guestStopGrace)
		}
	}
	if err == nil {
		return nil
	}
	var ee *sandbox.ExitError
	switch {
	case errors.Is(err, sandbox.ErrTransport):
		return fmt.Errorf("workspace: %s: %w", op, err)
	case ctx.Err() != nil:
		return fmt.Errorf("workspace: %s: %w", op, ctx.Err())
	case errors.As(err, &ee):
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return fmt.Errorf("workspace: %s failed in the sandbox: %w", op, err)
		}
		return fmt.Errorf("workspace: %s failed in the sandbox: %w: %s", op, err, msg)
	}
	return fmt.Errorf("workspace: %w: %s: %w", sandbox.ErrTransport, op, err)
}

// limitWriter passes at most n bytes to w and then fails every write.
type limitWriter struct {
	w    interface{ Write([]byte) (int, error) }
	n    int64
	over bool
}

var errLimit = errors.New("output limit exceeded")

// Write writes p to w, or fails with errLimit when p exceeds what is left of
// n.
func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		l.over = true
		return 0, errLimit
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}
