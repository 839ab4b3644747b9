package shell_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockdev/airlock/internal/shell"
)

// tarFiles is what the sandbox's `tar -c -f - NAMES...` sends for files.
func tarFiles(t testing.TB, names []string, bodies [][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, n := range names {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(bodies[i]))}))
		_, err := tw.Write(bodies[i])
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// missingOf returns the Missing field for the required tools whose bits
// are set in mask.
func missingOf(mask uint8) string {
	var sb strings.Builder
	for i, n := range shell.RequiredTools {
		if mask&(1<<i) != 0 {
			sb.WriteString(" " + n)
		}
	}
	return sb.String()
}

// FuzzProbeRoundTrip: a reply the host's own probe script would produce
// parses back to what it says.
func FuzzProbeRoundTrip(f *testing.F) {
	f.Add(true, false, uint8(0), false, []byte("{}"), []byte(nil), true, false)
	f.Add(false, true, uint8(5), true, []byte("x"), []byte("yy"), false, true)
	f.Fuzz(func(t *testing.T, sha, exch bool, mask uint8, leftovers bool, a, b []byte, sendB, notAsked bool) {
		const maxFile = 64
		caps := shell.Caps{SHA256: sha, Exchange: exch, Records: mask&0x80 != 0, Missing: missingOf(mask)}
		word := caps.Word()
		if notAsked {
			word = "-"
		}
		var reply bytes.Buffer
		reply.WriteString(shell.ProbeHeader + word + "\n")
		if leftovers {
			reply.WriteString(shell.LeftoversLine + "\n")
		}
		names, bodies := []string{"m-a.json"}, [][]byte{a}
		if sendB {
			names, bodies = append(names, "m-b.json"), append(bodies, b)
		}
		reply.Write(tarFiles(t, names, bodies))
		got, err := shell.ReadProbe(bytes.NewReader(reply.Bytes()), []string{"m-a.json", "m-b.json"}, maxFile, 1<<20)
		require.NoError(t, err)
		assert.Equal(t, !notAsked, got.Asked)
		if !notAsked {
			assert.Equal(t, caps, got.Caps)
		}
		assert.Equal(t, leftovers, got.Leftovers)
		want := [][]byte{nil, nil}
		for i := range bodies {
			if len(bodies[i]) <= maxFile {
				want[i] = append([]byte{}, bodies[i]...)
			}
		}
		assert.Equal(t, want, got.Files)
	})
}

// FuzzReadProbe: whatever a sandbox sends, a reply is accepted only within
// the bound, every file within its own, and every refusal is a protocol
// error.
func FuzzReadProbe(f *testing.F) {
	f.Add([]byte("airlock-probe 100\n"))
	f.Add(append([]byte("airlock-probe -\nairlock-leftovers\n"), tarFiles(f, []string{"a"}, [][]byte{[]byte("{}")})...))
	f.Add(append([]byte("airlock-probe 110 tar\n"), tarFiles(f, []string{"../a"}, [][]byte{[]byte("{}")})...))
	f.Add(append([]byte("airlock-probe 000\n"), tarFiles(f, []string{"a", "a"}, [][]byte{[]byte("1"), []byte("2")})...))
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxFile, maxAll = 16, 3000
		got, err := shell.ReadProbe(bytes.NewReader(data), []string{"a", "b"}, maxFile, maxAll)
		if err != nil {
			require.ErrorIs(t, err, shell.ErrProtocol)
			assert.False(t, errors.Is(err, shell.ErrTransport), "%v", err)
			return
		}
		assert.LessOrEqual(t, len(data), maxAll, "accepted more than the bound")
		require.Len(t, got.Files, 2)
		for _, f := range got.Files {
			assert.LessOrEqual(t, len(f), maxFile)
		}
		if got.Asked {
			assert.Equal(t, shell.ProbeHeader+got.Caps.Word()+"\n", string(data[:len(shell.ProbeHeader)+len(got.Caps.Word())+1]), "the word is canonical")
		}
	})
}

func TestReadProbeBounds(t *testing.T) {
	names := []string{"a", "b"}
	big := bytes.Repeat([]byte("x"), 2000)
	for _, c := range []struct {
		name, want string
		reply      []byte
	}{
		{"Empty", "the sandbox's reply is empty", nil},
		{"NoHeader", "not the probe header", []byte("hello\n")},
		{"TarForHeader", "does not start with a header line", tarFiles(t, []string{"a"}, [][]byte{[]byte("{}")})},
		{"EndlessHeader", "does not start with a header line", bytes.Repeat([]byte("h"), shell.MaxHeaderLine+1)},
		{"BadWord", "malformed capability word", []byte("airlock-probe 2x\n")},
		{"InjectedMissing", "malformed capability word", []byte("airlock-probe 000 tar; install evil\n")},
		{"NotAsked", "which was not asked for", append([]byte("airlock-probe -\n"), tarFiles(t, []string{"c"}, [][]byte{nil})...)},
		{"Twice", "twice", append([]byte("airlock-probe -\n"), tarFiles(t, []string{"a", "a"}, [][]byte{nil, nil})...)},
		{"Escape", "not a clean relative path", append([]byte("airlock-probe -\n"), tarFiles(t, []string{"../a"}, [][]byte{nil})...)},
		{"Flood", "more than 3000 bytes", append([]byte("airlock-probe -\n"), tarFiles(t, names, [][]byte{big, big})...)},
		{"Tail", "data after the end of the archive", append(append([]byte("airlock-probe -\n"), tarFiles(t, []string{"a"}, [][]byte{nil})...), bytes.Repeat([]byte{0}, shell.MaxArchiveTail+shell.TarReadAhead)...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			maxAll := int64(3000)
			if c.name == "Tail" {
				maxAll = 4 << 20
			}
			_, err := shell.ReadProbe(bytes.NewReader(c.reply), names, 16, maxAll)
			require.ErrorIs(t, err, shell.ErrProtocol)
			assert.ErrorContains(t, err, c.want)
		})
	}
	t.Run("PaddingAccepted", func(t *testing.T) {
		reply := append(append([]byte("airlock-probe 100\n"), tarFiles(t, []string{"b"}, [][]byte{[]byte("{}")})...), make([]byte, 10240)...)
		got, err := shell.ReadProbe(bytes.NewReader(reply), names, 16, 1<<20)
		require.NoError(t, err)
		assert.Equal(t, [][]byte{nil, []byte("{}")}, got.Files)
		assert.Equal(t, shell.Caps{SHA256: true}, got.Caps)
	})
	t.Run("HeaderKeptOnFailure", func(t *testing.T) {
		got, err := shell.ReadProbe(strings.NewReader("airlock-probe 010 tar\ngarbage"), names, 16, 1<<20)
		require.ErrorIs(t, err, shell.ErrProtocol)
		assert.Equal(t, shell.Caps{Exchange: true, Missing: " tar"}, got.Caps, "what the sandbox offers is learnt even when the archive fails")
	})
}

// FuzzParseCaps: a word is accepted only in its canonical form, naming
// only required tools, each once.
func FuzzParseCaps(f *testing.F) {
	for _, w := range []string{"100", "10", "011 tar chmod", "000 tar tar", "111 ", "1", "0000", "001 evil", "-"} {
		f.Add(w)
	}
	f.Fuzz(func(t *testing.T, word string) {
		c, err := shell.ParseCaps(word)
		if err != nil {
			require.ErrorIs(t, err, shell.ErrProtocol)
			return
		}
		assert.Equal(t, word, c.Word(), "round trip")
		assert.LessOrEqual(t, len(word), 3+len(missingOf(0xff)))
	})
}

func TestCapsRoundTrip(t *testing.T) {
	for mask := range 64 {
		for _, c := range []shell.Caps{{}, {SHA256: true}, {Exchange: true}, {Records: true}, {SHA256: true, Exchange: true, Records: true}} {
			c.Missing = missingOf(uint8(mask))
			got, err := shell.ParseCaps(c.Word())
			require.NoError(t, err, c.Word())
			assert.Equal(t, c, got)
		}
	}
}

// reportOf parses out as a send command's report that accepts want; sent:
// the host has sent the publish line (Report.PublishSent).
func reportOf(out []byte, want map[string]string, sent bool) *shell.Report {
	rep := shell.NewReport(want)
	if sent && !rep.PublishSent() {
		panic("PublishSent on a fresh report")
	}
	rep.Read(bytes.NewReader(out), func() {})
	return rep
}

// TestReportForgedPublishedDecidesFirst: a PublishedLine read before the
// host sent the publish line breaks the protocol, and the host may then no
// longer send it (PublishSent false); once the host sent it, the line is
// the script's own.
func TestReportForgedPublishedDecidesFirst(t *testing.T) {
	const out = "airlock-ready\nairlock-carried\nairlock-extracted\nairlock-published\n"
	forged := shell.NewReport(nil)
	broke := false
	forged.Read(strings.NewReader(out), func() { broke = true })
	require.True(t, broke)
	require.ErrorIs(t, forged.Err, shell.ErrProtocol)
	assert.Contains(t, forged.Err.Error(), "reported published before the host sent the publish line")
	assert.False(t, forged.PublishSent(), "the forged line came first: the publish line must not be written")
	assert.False(t, closed(forged.Published))

	sent := shell.NewReport(nil)
	require.True(t, sent.PublishSent())
	require.True(t, sent.PublishSent(), "asking again changes nothing")
	sent.Read(strings.NewReader(out), func() { t.Error("no protocol break here") })
	require.NoError(t, sent.Err)
	assert.True(t, closed(sent.Published))
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// FuzzReportRoundTrip: what the host's own send script prints (header,
// ready, the hash tools' lines, carried) parses back: exactly the files
// whose hash is the one wanted are carried.
func FuzzReportRoundTrip(f *testing.F) {
	f.Add(true, "dir/a b.txt", true, false, true, true)
	f.Add(false, "x", false, true, false, false)
	f.Add(true, "-n", true, true, true, false)
	f.Fuzz(func(t *testing.T, header bool, p string, match, binary, withOther, published bool) {
		if p == "" || strings.ContainsAny(p, "\n\r\\") || len(p) > 4096 || strings.HasPrefix(p, "./") {
			return // planCarry never carries such names (and no manifest path starts with ./)
		}
		hashed := p // the carry hashes a name starting with "-" as ./NAME
		if strings.HasPrefix(p, "-") {
			hashed = "./" + p
		}
		sum := strings.Repeat("ab", 32)
		want := map[string]string{p: sum}
		var out bytes.Buffer
		if header {
			out.WriteString(shell.ProbeHeader + "100\n")
		}
		out.WriteString(shell.ReadyLine + "\n")
		got := sum
		if !match {
			got = strings.Repeat("cd", 32)
		}
		out.WriteString(shell.FormatHashLine(got, hashed, binary))
		if withOther {
			out.WriteString(shell.FormatHashLine(sum, hashed+"-other", binary))
		}
		out.WriteString(shell.CarriedLine + "\n")
		if published {
			out.WriteString(shell.ExtractedLine + "\n" + shell.PublishedLine + "\n")
		}
		rep := reportOf(out.Bytes(), want, published)
		require.NoError(t, rep.Err)
		assert.True(t, closed(rep.Ready))
		assert.True(t, closed(rep.Carried))
		assert.Equal(t, published, closed(rep.Extracted))
		assert.Equal(t, published, closed(rep.Published))
		if header {
			assert.Equal(t, "100", rep.Caps)
		}
		assert.Equal(t, match, rep.Hashes[p])
		assert.Len(t, rep.Hashes, map[bool]int{true: 1, false: 0}[match])
	})
}

// FuzzReport: whatever a sandbox prints, only wanted hashes are taken, no
// line over MaxReportLine is accepted, no line of the protocol's but
// linked lines comes during the carry, nothing but ExtractedLine follows
// CarriedLine, PublishedLine only counts once the host sent its publish
// line, and every refusal is a protocol error.
func FuzzReport(f *testing.F) {
	f.Add([]byte("airlock-ready\n"+strings.Repeat("0", 64)+"  a\nairlock-carried\n"), false)
	f.Add([]byte("airlock-carried\nairlock-ready\n"), false)
	f.Add([]byte("airlock-probe 100\nairlock-probe 100\n"), false)
	f.Add([]byte("airlock-ready\nairlock-linked a\nairlock-carried\nairlock-extracted\nairlock-published\n"), true)
	f.Add([]byte("airlock-ready\nairlock-extracted\nairlock-carried\n"), true)
	f.Add([]byte("airlock-ready\nairlock-carried\nairlock-extracted\nairlock-published\n"), false)
	f.Fuzz(func(t *testing.T, out []byte, sent bool) {
		want := map[string]string{"a": strings.Repeat("0", 64)}
		rep := reportOf(out, want, sent)
		assert.True(t, closed(rep.Done))
		if rep.Err != nil {
			require.ErrorIs(t, rep.Err, shell.ErrProtocol)
			return
		}
		if closed(rep.Published) {
			assert.True(t, sent, "published before the host sent the publish line")
		}
		if closed(rep.Carried) { // between ReadyLine and CarriedLine: hash lines, linked lines, other tools' lines
			ready := false
			for _, l := range strings.Split(string(out), "\n") {
				if !ready {
					ready = l == shell.ReadyLine
					continue
				}
				if l == shell.CarriedLine {
					break
				}
				if strings.HasPrefix(l, shell.ReportPrefix) {
					assert.True(t, strings.HasPrefix(l, shell.LinkedLine), "%q during the carry", l)
				}
			}
		}
		if closed(rep.Carried) { // after CarriedLine a complete line can only be ExtractedLine
			_, after, _ := bytes.Cut(out, []byte("\n"+shell.CarriedLine+"\n"))
			if next, _, complete := bytes.Cut(after, []byte("\n")); complete {
				assert.Equal(t, shell.ExtractedLine, string(next))
			}
		}
		checked := out // after the report of the stream extracted, the publish's output is drained unread
		if closed(rep.Extracted) {
			checked, _, _ = bytes.Cut(out, []byte(shell.ExtractedLine+"\n"))
		}
		for _, l := range bytes.Split(checked, []byte("\n")) {
			assert.LessOrEqual(t, len(l), shell.MaxReportLine)
		}
		if closed(rep.Published) {
			assert.Contains(t, string(out), shell.ExtractedLine+"\n"+shell.PublishedLine+"\n")
		}
		for p := range rep.Hashes {
			_, ok := want[p]
			assert.True(t, ok, "%q was not carried", p)
		}
	})
}

// TestReportPublish: after the stream is reported extracted, PublishedLine
// must come first; anything else (a noisy mv, an endless line) is drained
// without error, and the command's exit status decides.
func TestReportPublish(t *testing.T) {
	const head = "airlock-ready\nairlock-carried\n"
	noise := strings.Repeat("x", 3*shell.MaxReportLine)
	for _, c := range []struct {
		name, out            string
		extracted, published bool
	}{
		{"Published", head + "airlock-extracted\nairlock-published\n", true, true},
		{"PublishedThenNoise", head + "airlock-extracted\nairlock-published\n" + noise, true, true},
		{"NoiseFirst", head + "airlock-extracted\n" + noise + "\nairlock-published\n", true, false},
		{"NoiseUnterminated", head + "airlock-extracted\n" + noise, true, false},
		{"NotExtracted", head, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := shell.NewReport(nil)
			require.True(t, rep.PublishSent())
			rep.Read(strings.NewReader(c.out), func() { t.Error("no protocol break here") })
			require.NoError(t, rep.Err)
			assert.Equal(t, c.extracted, closed(rep.Extracted))
			assert.Equal(t, c.published, closed(rep.Published))
		})
	}
}

func TestReportBounds(t *testing.T) {
	for _, c := range []struct{ name, out, want string }{
		{"OutOfOrder", "airlock-carried\nairlock-ready\n", "unexpected output before the temporary directory was made"},
		{"TwoHeaders", "airlock-probe 100\nairlock-probe 100\n", "unexpected output"},
		{"EndlessLine", "airlock-ready\n" + strings.Repeat("z", shell.MaxReportLine+1) + "\n", "a report line of more than"},
		{"EndlessUnterminated", "airlock-ready\n" + strings.Repeat("z", 20<<10), "a report line of more than"},
		{"TooManyHashLines", "airlock-ready\n" + strings.Repeat(strings.Repeat("0", 64)+"  a\n", 18), "more hash lines than files carried"},
		{"AfterCarry", "airlock-ready\nairlock-carried\n" + strings.Repeat("x\n", 70), "output after the carry"},
		{"GarbledExtracted", "airlock-ready\nairlock-carried\nairlock-extracted junk\n", `output after the carry: "airlock-extracted junk"`},
		{"PublishedBeforeExtracted", "airlock-ready\nairlock-carried\nairlock-published\nairlock-extracted\n", `output after the carry: "airlock-published"`},
		{"PublishedBeforeSent", "airlock-ready\nairlock-carried\nairlock-extracted\nairlock-published\n", "the copy reported published before the host sent the publish line"},
		{"ExtractedDuringCarry", "airlock-ready\nairlock-extracted\nairlock-carried\n", `out-of-order line during the carry: "airlock-extracted"`},
		{"UnknownDuringCarry", "airlock-ready\nairlock-bogus\nairlock-carried\n", `out-of-order line during the carry: "airlock-bogus"`},
		{"ReadyDuringCarry", "airlock-ready\nairlock-ready\n", `out-of-order line during the carry: "airlock-ready"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			rep := shell.NewReport(map[string]string{"a": strings.Repeat("0", 64)})
			rep.Read(strings.NewReader(c.out), func() { calls++ })
			require.ErrorIs(t, rep.Err, shell.ErrProtocol)
			assert.ErrorContains(t, rep.Err, c.want)
			assert.Equal(t, 1, calls, "onErr runs once")
		})
	}
}

// TestLineWatch: the line is seen across writes of any size, and only at
// the start of the output.
func TestLineWatch(t *testing.T) {
	for _, c := range []struct {
		parts []string
		saw   bool
	}{
		{[]string{"airlock-published\n"}, true},
		{[]string{"air", "lock-pub", "lished", "\n", "rest"}, true},
		{[]string{"airlock-publishedX\n"}, false},
		{[]string{"x\nairlock-published\n"}, false},
		{[]string{"airlock-published"}, false},
	} {
		w := shell.NewLineWatch(shell.PublishedLine)
		for _, p := range c.parts {
			n, err := w.Write([]byte(p))
			require.NoError(t, err)
			require.Equal(t, len(p), n)
		}
		assert.Equal(t, c.saw, w.Saw(), "%q", c.parts)
		assert.Equal(t, c.saw, closed(w.Seen()), "%q", c.parts)
	}
}

// shells returns the POSIX shells of this machine the scripts must run
// under.
func shells(t *testing.T) [][]string {
	var out [][]string
	for _, s := range [][]string{{"sh"}, {"dash"}, {"busybox", "sh"}} {
		if _, err := exec.LookPath(s[0]); err != nil {
			t.Logf("%s is not installed: not tested under it", s[0])
			continue
		}
		out = append(out, s)
	}
	return out
}

// TestScriptsUnderShells runs the probe header and the fetch script under
// sh, dash and busybox sh, and parses what they print with the parsers.
func TestScriptsUnderShells(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "rt")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a", "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a", "d", "f"), []byte("content"), 0o644))
	for _, sh := range shells(t) {
		run := func(script string) ([]byte, []byte, error) {
			cmd := exec.Command(sh[0], append(sh[1:], "-c", script)...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			return out.Bytes(), errb.Bytes(), err
		}
		for _, s := range []string{shell.DetectScript + shell.EchoHeader, shell.FetchScript(root, root+"/a")} {
			_, stderr, err := run("set -n\n" + s)
			require.NoError(t, err, "%v -n: %s", sh, stderr)
		}
		out, _, err := run(shell.DetectScript + shell.EchoHeader)
		require.NoError(t, err)
		got, err := shell.ReadProbe(bytes.NewReader(out), nil, 0, 1<<10)
		require.NoError(t, err, "%v: %q", sh, out)
		assert.True(t, got.Asked)

		out, _, err = run(shell.FetchScript(root, root+"/a"))
		require.NoError(t, err)
		files := map[string]string{}
		end := false
		require.NoError(t, shell.ReadFetch(bytes.NewReader(out), func(e shell.Entry, r io.Reader) error {
			b, err := io.ReadAll(r)
			files[e.Path] = string(b)
			return err
		}, func() { end = true }), "%v", sh)
		assert.True(t, end)
		assert.Equal(t, map[string]string{"d": "", "d/f": "content"}, files, "%v", sh)

		_, stderr, err := run(shell.FetchScript(root, root+"/missing"))
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		assert.Equal(t, shell.FetchUnusable, ee.ExitCode())
		reason, ok := shell.FetchReason(string(stderr))
		assert.True(t, ok)
		assert.Equal(t, "is missing", reason, "%v", sh)
	}
}

func TestReadFetchHostile(t *testing.T) {
	escape := tarFiles(t, []string{"../x"}, [][]byte{[]byte("x")})
	err := shell.ReadFetch(bytes.NewReader(escape), func(shell.Entry, io.Reader) error {
		t.Fatal("an escaping member reached fn")
		return nil
	}, func() { t.Fatal("not the end") })
	require.ErrorIs(t, err, shell.ErrProtocol)
	assert.ErrorContains(t, err, `"../x", which is not a clean relative path`)

	tail := append(tarFiles(t, []string{"a"}, [][]byte{nil}), bytes.Repeat([]byte{0}, shell.MaxArchiveTail+shell.TarReadAhead)...)
	err = shell.ReadFetch(bytes.NewReader(tail), func(shell.Entry, io.Reader) error { return nil }, func() {})
	require.ErrorIs(t, err, shell.ErrProtocol)
	assert.ErrorContains(t, err, "data after the end of the archive")
}
