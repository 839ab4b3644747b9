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
// malformed one is output, and the last two break the protocol.
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
		if rs.Broken != "a record longer than 64 bytes" {
			t.Fatalf("cut at %d: Broken %q, want the oversized record's", cut, rs.Broken)
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
		if rs := w.Records(); rs.Broken != "a record longer than 64 bytes" || !rs.Ended || rs.Status != 137 {
			t.Fatalf("random chunks: records %+v", rs)
		}
	}
}

// TestRecordWriterBroken: records with the call's nonce that do not parse,
// are too long, or come out of the wrapper's order (no-dir alone; start,
// then end; each once) break the protocol, whatever the chunking; the
// first of each record counts. The wrapper's own sequences, and records
// with another nonce, do not. A record cut off by the end of the stream is
// no record, unless it follows the last one.
func TestRecordWriterBroken(t *testing.T) {
	const nonce = "0123456789abcdef0123456789abcdef"
	tag := ExecRecordPrefix + nonce + ": "
	other := ExecRecordPrefix + "ffffffffffffffffffffffffffffffff: "
	start, end := tag+"start 42 group\n", tag+"end 0 \n"
	for _, c := range []struct {
		name, in, broken string
		status           int
	}{
		{"the wrapper's run", "out" + start + "err\n" + end, "", 0},
		{"the wrapper's no-dir", tag + "no-dir\n", "", 0},
		{"another nonce's records", start + other + "end 1 \n" + other + "end 2 \n" + other + "garbled\n" + end, "", 0},
		{"a cut record before the end", start + tag + "end 1", "", 0},
		{"garbled", start + tag + "end x\n" + end, `the record "end x" does not parse`, 0},
		{"a word too many", start + tag + "end 0  KILL\n" + end, `the record "end 0  KILL" does not parse`, 0},
		{"an empty record", start + tag + "\n" + end, `the record "" does not parse`, 0},
		{"a status of four digits", start + tag + "end 1000 \n", `the record "end 1000 " does not parse`, 0},
		{"oversized", start + tag + "end 0 " + strings.Repeat("A", 70) + "\n" + end, "a record longer than 64 bytes", 0},
		{"a second end", start + end + tag + "end 1 \n", `a second end record "end 1 "`, 0},
		{"a second end first", start + tag + "end 1 \n" + end, `a second end record "end 0 "`, 1},
		{"an end without a start", tag + "end 0 \n", `an end record "end 0 " without a start record`, 0},
		{"a second start", start + tag + "start 7 nogroup\n" + end, "a start record after another record", 0},
		{"a start after the end", start + end + start, "a start record after another record", 0},
		{"a no-dir after the start", start + tag + "no-dir\n" + end, "a no-dir record after another record", 0},
		{"a no-dir twice", tag + "no-dir\n" + tag + "no-dir\n", "a no-dir record after another record", 0},
		{"a cut record after the end", start + end + tag + "end 1", "a record cut off after the last record", 0},
	} {
		for cut := 0; cut <= len(c.in); cut++ {
			w := NewRecordWriter(nonce, nil)
			_, _ = w.Write([]byte(c.in[:cut]))
			_, _ = w.Write([]byte(c.in[cut:]))
			w.Flush()
			rs := w.Records()
			if rs.Broken != c.broken {
				t.Fatalf("%s, cut at %d: Broken %q, want %q", c.name, cut, rs.Broken, c.broken)
			}
			if rs.Ended && rs.Status != c.status {
				t.Fatalf("%s, cut at %d: status %d, want %d (the first end record counts)", c.name, cut, rs.Status, c.status)
			}
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
