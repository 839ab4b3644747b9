package shell

import (
	"bytes"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
)

// TestRecordWriterSplits feeds output with records in it, cut at every
// place: what passes is the output less the records, byte-exact, and the
// records are read; a record with another nonce, an oversized or a
// malformed one is output.
func TestRecordWriterSplits(t *testing.T) {
	const nonce = "0123456789abcdef0123456789abcdef"
	tag := ExecRecordPrefix + nonce + ": "
	other := ExecRecordPrefix + "ffffffffffffffffffffffffffffffff: end 0 \n"
	junk := tag + "end 1 " + strings.Repeat("Z", 80) + "\n" + tag + "begin 3\n" + ExecRecordPrefix + nonce
	in := "a" + tag + "start 42 group\n" + "b\x00\xff" + other + junk + "c" + tag + "end 137 KILL\n" + "tail without newline " + tag[:10]
	want := "a" + "b\x00\xff" + other + junk + "c" + "tail without newline " + tag[:10]
	for cut := 0; cut <= len(in); cut++ {
		var out bytes.Buffer
		w := NewRecordWriter(nonce, &out)
		_, _ = w.Write([]byte(in[:cut]))
		_, _ = w.Write([]byte(in[cut:]))
		w.Flush()
		if out.String() != want {
			t.Fatalf("cut at %d: passed %q, want %q", cut, out.String(), want)
		}
		rs := w.Records()
		if !rs.Started || rs.Pid != "42" || rs.Group != "group" || !rs.Ended || rs.Status != 137 || rs.Signal != "KILL" {
			t.Fatalf("cut at %d: records %+v", cut, rs)
		}
	}
	// Byte by byte, and in random chunks.
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var out bytes.Buffer
		w := NewRecordWriter(nonce, &out)
		for rest := in; rest != ""; {
			n := min(len(rest), 1+rng.IntN(8))
			_, _ = w.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		w.Flush()
		if out.String() != want {
			t.Fatalf("random chunks: passed %q, want %q", out.String(), want)
		}
	}
}

// TestWrapperScriptsParse checks the wrapper's and the kill script's text
// with sh -n under every shell installed here.
func TestWrapperScriptsParse(t *testing.T) {
	small, _ := ExecWrapper(ExecCall{Nonce: "n", ID: "i", Script: "echo hi", Dir: "/tmp/a b", Deadline: 3})
	large, _ := ExecWrapper(ExecCall{Nonce: "n", ID: "i", Script: strings.Repeat("echo hi\n", MaxArgScript/8+1)})
	scripts := map[string]string{"small": small, "large": large, "kill": KillScript("i", "", ""), "kill with pid": KillScript("i", "12", "group")}
	ran := 0
	for _, sh := range [][]string{{"dash"}, {"bash", "--posix"}, {"busybox", "sh"}} {
		if _, err := exec.LookPath(sh[0]); err != nil {
			t.Logf("%s is not installed: not checked with it", sh[0])
			continue
		}
		ran++
		for name, s := range scripts {
			out, err := exec.Command(sh[0], append(sh[1:], "-n", "-c", s)...).CombinedOutput()
			if err != nil {
				t.Errorf("%s -n: the %s script does not parse: %v: %s", sh[0], name, err, out)
			}
		}
	}
	if ran == 0 {
		t.Fatal("no POSIX shell found (dash, bash, busybox)")
	}
}
