package shell

import (
	"bytes"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"testing"
)

// hostileWord is a value that every script must carry as one word: quotes,
// a newline, globs, a command substitution and a leading dash.
const hostileWord = "-x 'it''s' \"q\" $(id) `id` *?[a] \n; &&"

// scriptSamples returns representative instances of every script this
// package produces, by name: with plain values, and with values that only
// survive correct quoting. A new script (or template) gets its line here,
// so that the syntax checks below cover it.
func scriptSamples() map[string]string {
	oid := strings.Repeat("a", 40)
	out := map[string]string{
		"GitPrelude": GitPrelude,
		"FindReport": FindReport,
	}
	for _, v := range []struct{ name, word string }{{"plain", "/work/tree"}, {"hostile", "/tmp/" + hostileWord}} {
		w := v.word
		out["WorkspaceProbeScript/"+v.name] = WorkspaceProbeScript(w)
		out["WorkspaceMarkerScript/"+v.name] = WorkspaceMarkerScript(w)
		out["PlainPrepareScript/"+v.name] = PlainPrepareScript(w, ".airlock-tmp-x", "abc123", PrepareTurn{Seq: 1})
		out["PlainPrepareScript/"+v.name+"/modes"] = PlainPrepareScript("/tmp", w, w, PrepareTurn{Seq: 1 << 62, Wait: 7})
		out["ModesScript/"+v.name] = string(ModesScript("new/tree/", []Entry{{Path: w, Mode: fs.ModeDir | 0o555}, {Path: w + "/a", Mode: fs.ModeDir | 0o700}}))
		out["PlainRestoreScript/"+v.name] = PlainRestoreScript(w, "abc123", "tok"+hostileWord, false)
		out["PlainRestoreScript/"+v.name+"/marked"] = PlainRestoreScript(w, w, "tok", true)
		out["GitRestoreScript/"+v.name] = GitRestoreScript(w, "abc123", "tok"+hostileWord, oid, true, []string{":(exclude,glob)" + hostileWord, "."}, []string{strings.Repeat("ab", 20)})
		for _, bundle := range []bool{false, true} {
			name := "GitPrepareScript/" + v.name
			if bundle {
				name += "/bundle"
			}
			out[name] = GitPrepareScript(GitPrepare{Remote: w, ID: "abc123", Branch: "refs/heads/main", Head: oid, Snap: oid,
				Index: oid, TmpRef: "refs/airlock/tmp/x/abc123/snap", Bundle: bundle, Exclude: []string{hostileWord, "*.o"}})
		}
		for _, ask := range []bool{false, true} {
			name := "FileScript/" + v.name
			if ask {
				name += "/ask"
			}
			out[name] = FileScript(w, []string{"d", hostileWord, "f"}, ask)
			out[name+"/relative"] = FileScript("rel/"+hostileWord, []string{"f"}, ask)
			out[name+"/here"] = FileScript("", []string{"f"}, ask)
		}
		stageSamples(out, v.name, w)
		remoteSamples(out, v.name, w)
	}
	return out
}

// stageSamples adds package stage's scripts (stage.Bridge's probe, sweep,
// send, carry, publish, cleanup, list and remove) for the word w, under
// names ending in /name.
func stageSamples(out map[string]string, name, w string) {
	root := "/rt/" + w
	tmp := root + "/" + TempPrefix + w + "-0123456789abcdef"
	dst := root + "/" + w
	skip := Skip{Names: []string{TempPrefix + w + "-00", TempPrefix + "b-11"}, Tag: "0a1b2c3d", Seq: 7}
	plan := PlanCarry([]CarryFile{{Path: "a", Mode: 0o644, SHA256: strings.Repeat("a", 64)}, {Path: w, Mode: 0o755, SHA256: strings.Repeat("b", 64)}, {Path: "d/e f", Mode: 0o600}})
	for _, detect := range []bool{false, true} {
		out[fmt.Sprintf("ProbeScript/%s/detect=%v", name, detect)] = ProbeScript(root, detect, skip, []string{w, "b"})
		out[fmt.Sprintf("SendScript/%s/detect=%v", name, detect)] = SendScript(Send{Root: root, Tmp: tmp, Dst: dst, Detect: detect, Skip: skip, Split: detect})
		out[fmt.Sprintf("SendScript/%s/detect=%v/carry", name, detect)] = SendScript(Send{Root: root, Tmp: tmp, Dst: dst, Detect: detect, Hash: true, Carry: &plan})
		out[fmt.Sprintf("PublishScript/%s/exchange=%v", name, detect)] = PublishScript(tmp, dst, root+"/"+ManifestName(w), w, detect, !detect, []FileID{{Dev: 2049, Ino: 12, OK: true}, {}})
	}
	out["ProbeScript/"+name+"/none"] = ProbeScript(root, false, Skip{}, nil)
	out["SendScript/"+name+"/top"] = SendScript(Send{Root: "/" + w, Tmp: "/" + w + "/" + TempPrefix + "a-00", Dst: "/" + w + "/a"})
	out["SweepRootScript/"+name] = SweepRootScript(root, skip)
	out["SweepRootScript/"+name+"/noskip"] = SweepRootScript(root, Skip{})
	out["CarryScript/"+name] = CarryScript(&plan, tmp, dst)
	out["CleanupScript/"+name] = CleanupScript(tmp, dst, w)
	out["AssetsScript/"+name] = AssetsScript(root, skip)
	out["RemoveScript/"+name] = RemoveScript(root, TempPrefix+"unstage-00", skip, []string{w, "b"}, nil)
}

// remoteSamples adds remote.Host's wrapper (the env prelude, the header
// and the supervisor), its session command and stop script, sandbox.Watch's
// end wrapper and the stdin script for the word w, under names ending in
// /name.
func remoteSamples(out map[string]string, name, w string) {
	script := "echo " + Quote(w) + "; exit 3"
	out["EnvReader/"+name] = EnvReader("exit 125")
	out["HeaderScript/"+name] = HeaderScript("/tmp/" + w)
	out["HeaderScript/"+name+"/nodir"] = HeaderScript("")
	out["Supervise/"+name] = Supervise(script)
	out["RemoteWrapper/"+name] = EnvReader("exit 125") + HeaderScript("/tmp/"+w) + Supervise(script)
	out["SessionCommand/"+name] = SessionCommand(EnvReader("exit 125") + HeaderScript(w) + Supervise(script))
	out["StopSupervisorScript"] = StopSupervisorScript(12345)
	out["WatchEndScript/"+name] = WatchEndScript(script)
	out["StdinScript"] = StdinScript
}

// shells are the POSIX shells every script must parse and run under.
var shells = []struct {
	name string
	argv []string // the shell; "-c script" or "-n" follows
}{
	{"dash", []string{"dash"}},
	{"busybox sh", []string{"busybox", "sh"}},
	{"sh", []string{"sh"}},
}

// TestScriptsParse runs `<shell> -n` on every script sample under dash,
// busybox sh and the system's sh: each must parse.
func TestScriptsParse(t *testing.T) {
	samples := scriptSamples()
	if len(samples) < 20 {
		t.Fatalf("only %d script samples", len(samples))
	}
	for _, sh := range shells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := exec.LookPath(sh.argv[0]); err != nil {
				t.Skipf("%s is not installed (Debian: apt-get install dash busybox-static): %v", sh.argv[0], err)
			}
			for name, script := range samples {
				cmd := exec.Command(sh.argv[0], append(sh.argv[1:], "-n")...)
				cmd.Stdin = strings.NewReader(script)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					t.Errorf("%s -n %s: %v: %s", sh.name, name, err, stderr.String())
				}
			}
		})
	}
}

// TestScriptsParseCatchesErrors shows that the check above can fail: a
// script with an unclosed quote is refused by every shell.
func TestScriptsParseCatchesErrors(t *testing.T) {
	for _, sh := range shells {
		if _, err := exec.LookPath(sh.argv[0]); err != nil {
			t.Skipf("%s is not installed (Debian: apt-get install dash busybox-static): %v", sh.argv[0], err)
		}
		cmd := exec.Command(sh.argv[0], append(sh.argv[1:], "-n")...)
		cmd.Stdin = strings.NewReader(FileScript("/x", []string{"f"}, false) + "echo 'unclosed\n")
		if err := cmd.Run(); err == nil {
			t.Errorf("%s -n accepted a script with an unclosed quote", sh.name)
		}
	}
}

// TestQuotedWordsSurvive runs the assignments of the samples' scripts
// under each shell: a hostile value arrives as the very word it was.
func TestQuotedWordsSurvive(t *testing.T) {
	for _, sh := range shells {
		t.Run(sh.name, func(t *testing.T) {
			if _, err := exec.LookPath(sh.argv[0]); err != nil {
				t.Skipf("%s is not installed (Debian: apt-get install dash busybox-static): %v", sh.argv[0], err)
			}
			out, err := exec.Command(sh.argv[0], append(sh.argv[1:], "-c", "r="+Quote(hostileWord)+"; printf %s \"$r\"")...).Output()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != hostileWord {
				t.Fatalf("%s: %q arrived as %q", sh.name, hostileWord, out)
			}
		})
	}
}
