package deliverable

// Black-box attack on DetectRequests (written from go doc only): its
// documented guarantees are determinism, no panics, verbatim sorted
// deduplicated Files, File whenever Files, and work linear in the text.

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// a21Objectives reads every objective of the worked cases.
func a21Objectives(t *testing.T) []string {
	var out []string
	for _, c := range detectLoadCases(t, detectCasesPath) {
		out = append(out, c.Objective)
	}
	return out
}

// a21Hostile returns inputs meant to trip a reader.
func a21Hostile() map[string]string {
	h := map[string]string{
		"empty":          "",
		"nul":            "Save\x00 the report as out\x00.json\x00 and attach report.pdf\x00",
		"invalid-utf8":   "Save the summary as r\xffe\xfep\xc3ort.json and export \xed\xa0\x80x.csv \xf4\x90\x80\x80",
		"lone-cont":      strings.Repeat("\x80\xbf", 5000) + " save as a.json",
		"truncated-rune": "Attach out.csv\xe6\x97",
		"only-backticks": strings.Repeat("`", 100000),
		"backtick-lines": strings.Repeat("```\n", 20000) + "Save as x.json",
		"crlf-mixed":     "Build it.\r\nDeliverables:\r\n- a.html\r\n\r- b.css\n\r\n- c.js\r",
		"cr-only":        "Deliverables:\r- a.html\r- b.css\r",
		"deep-bullets":   strings.Repeat("- ", 10000) + "out.json",
		"deep-indent": func() string {
			var b strings.Builder
			b.WriteString("Deliverables:\n")
			for i := 0; i < 10000; i++ {
				b.WriteString(strings.Repeat(" ", i%400))
				fmt.Fprintf(&b, "- f%d.json\n", i)
			}
			return b.String()
		}(),
		"cjk-nospace":    strings.Repeat("結果をreport.csvとして保存してください", 3000),
		"huge-line":      strings.Repeat("a", 1<<20) + ".json",
		"huge-word-ext":  "Save as " + strings.Repeat("x", 200000) + ".pdf",
		"dots":           strings.Repeat(".", 100000),
		"ext-only":       strings.Repeat(".json ", 20000),
		"slashes":        strings.Repeat("/", 50000) + "a.json",
		"many-names":     "Deliverables:\n" + strings.Repeat("- out.json\n", 20000),
		"quote-storm":    strings.Repeat("\"'«»“”`", 20000) + " attach a.pdf",
		"bom":            "\ufeffSave as out.json\ufeff",
		"rtl-override":   "Save as \u202eosj.tuo\u202c and out.json",
		"nul-in-name":    "Write results to a\x00b.json.",
		"unicode-spaces": "Save\u00a0as\u2003out.json\u3000and\u2028attach\u2029b.pdf",
		"zero-width":     "Save as out\u200b.json and x\u200d.csv",
		"combining":      "Save as re\u0301sume\u0301.pdf",
		"surrogate-esc":  "Save as \xed\xb0\x80.json",
		"md-heading-rep": strings.Repeat("# Deliverables\n", 10000),
		"inputs-deliv":   strings.Repeat("Inputs:\n- a.csv\nDeliverables:\n- a.csv\n", 5000),
		"backtick-runs": func() string {
			var b strings.Builder
			for i := 1; i < 400; i++ {
				b.WriteString(strings.Repeat("`", i))
				b.WriteString(" save as out.json ")
			}
			return b.String()
		}(),
	}
	return h
}

// TestAttack21DetectHostileInputs: no panic and the documented shape on
// hostile inputs.
func TestAttack21DetectHostileInputs(t *testing.T) {
	for name, in := range a21Hostile() {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panic: %v", name, p)
				}
			}()
			r := DetectRequests(in)
			detectCheck(t, in, r)
			if r2 := DetectRequests(in); !reflect.DeepEqual(r, r2) {
				t.Errorf("two calls differ: %+v vs %+v", r, r2)
			}
		})
	}
}

// TestAttack21DetectHostileExact pins what a few hostile inputs must give.
func TestAttack21DetectHostileExact(t *testing.T) {
	cases := []struct {
		in    string
		files []string
	}{
		{"Build it.\r\nDeliverables:\r\n- a.html\r\n- b.css\r\n", []string{"a.html", "b.css"}},
		{"Build it.\nDeliverables:\n- a.html\n- b.css\n", []string{"a.html", "b.css"}},
		{"Deliverables:\n" + strings.Repeat("- out.json\n", 20000), []string{"out.json"}},
	}
	for _, c := range cases {
		r := DetectRequests(c.in)
		if !reflect.DeepEqual(r.Files, c.files) || !r.File {
			t.Errorf("%.40q: got %+v, want files %q", c.in, r, c.files)
		}
	}
}

// TestAttack21DetectNoGoroutineLeak: many calls leave no goroutine behind.
func TestAttack21DetectNoGoroutineLeak(t *testing.T) {
	objs := a21Objectives(t)
	long := strings.Join(objs[:min(400, len(objs))], "\n")
	runtime.GC()
	before := runtime.NumGoroutine()
	for i := 0; i < 200; i++ {
		DetectRequests(objs[i%len(objs)])
		if i%50 == 0 {
			DetectRequests(long)
		}
	}
	// also concurrent callers
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() { defer wg.Done(); DetectRequests(long) }()
	}
	wg.Wait()
	deadline := time.Now().Add(2 * time.Second)
	after := runtime.NumGoroutine()
	for after > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		after = runtime.NumGoroutine()
	}
	if after > before {
		t.Errorf("goroutines: %d before, %d after", before, after)
	}
}

// TestAttack21DetectDeterminismMixed: texts made of 3 to 12 worked cases
// picked at random (fixed seed), joined by line breaks, blank lines or
// spaces, so that labels, lists, exemptions and headings of one case sit
// next to sentences of another. Each text is read once at GOMAXPROCS 1,
// then 4 times concurrently at GOMAXPROCS 8; every reading must agree.
func TestAttack21DetectDeterminismMixed(t *testing.T) {
	objs := a21Objectives(t)
	rng := rand.New(rand.NewPCG(21, 21))
	seps := []string{"\n", "\n\n", " ", "\r\n", "\n\n- "}
	texts := make([]string, 400)
	for i := range texts {
		k := 3 + rng.IntN(10)
		parts := make([]string, k)
		for j := range parts {
			parts[j] = objs[rng.IntN(len(objs))]
		}
		texts[i] = strings.Join(parts, seps[rng.IntN(len(seps))])
	}
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	ref := make([]Requests, len(texts))
	for i, s := range texts {
		ref[i] = DetectRequests(s)
		detectCheck(t, s, ref[i])
	}
	runtime.GOMAXPROCS(8)
	var mu sync.Mutex
	var wg sync.WaitGroup
	bad := map[int]string{}
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := range texts {
				j := (i + g*97) % len(texts)
				if got := DetectRequests(texts[j]); !reflect.DeepEqual(got, ref[j]) {
					mu.Lock()
					bad[j] = fmt.Sprintf("got %+v, want %+v", got, ref[j])
					mu.Unlock()
				}
			}
		}(g)
	}
	wg.Wait()
	for j, d := range bad {
		t.Errorf("mixed%d %q: %s", j, texts[j], d)
	}
}

// TestAttack21DetectGOMAXPROCSChanging: GOMAXPROCS changes between 1 and 8
// while calls are running (a host may resize it at any time). Every call
// must still return the reference result, and none may panic.
func TestAttack21DetectGOMAXPROCSChanging(t *testing.T) {
	objs := a21Objectives(t)
	texts := []string{
		strings.Join(objs[:300], "\n"),
		strings.Join(objs[300:600], " "),
		strings.Join(objs[600:900], "\n\n"),
		strings.Repeat("Save the summary as report.json and attach chart.png.\n", 5000),
	}
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	ref := make([]Requests, len(texts))
	for i, s := range texts {
		ref[i] = DetectRequests(s)
	}
	stop := make(chan struct{})
	toggled := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				toggled <- n
				return
			default:
			}
			runtime.GOMAXPROCS(1 + 7*(n%2))
			n++
			time.Sleep(200 * time.Microsecond)
		}
	}()
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("panic: %v", p))
					mu.Unlock()
				}
			}()
			for r := 0; r < 6; r++ {
				i := (g + r) % len(texts)
				if got := DetectRequests(texts[i]); !reflect.DeepEqual(got, ref[i]) {
					mu.Lock()
					errs = append(errs, fmt.Sprintf("text %d: got %+v, want %+v", i, got, ref[i]))
					mu.Unlock()
				}
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	n := <-toggled
	t.Logf("GOMAXPROCS changed %d times", n)
	for _, e := range errs {
		t.Error(e)
	}
}

// TestAttack21DetectCrossSentenceOrder: sentences that bear on the same
// files from different sides (written, exempted as "not a deliverable",
// attached, negated, listed as inputs) repeated many times with sentences
// of very different lengths between them, so that goroutines finish them
// out of order. Each text's reading must not depend on GOMAXPROCS or on
// the run: 2 readings at GOMAXPROCS 8 against one at GOMAXPROCS 1.
func TestAttack21DetectCrossSentenceOrder(t *testing.T) {
	filler := func(n int) string { return strings.Repeat("the quick brown fox jumps ", n) + "over it. " }
	pieces := []string{
		"Write scratch.md. This is scratch space, not a  ",
		"Attach scratch.md. ",
		"Do not write final.md. ",
		"Write final.md and attach it. ",
		"Inputs:\n- data.csv\n",
		"Deliverables:\n- data.csv\n- out.json\n\n",
		"Write a.txt. This is an internal verification file, not a  ",
		"Save the summary as a.txt. ",
		"Use template.docx as a model and save as report.docx. ",
		"Do not attach report.docx. ",
	}
	var texts []string
	for k := 0; k < 12; k++ {
		var b strings.Builder
		for i := 0; i < 40; i++ {
			b.WriteString(pieces[(i*k+i/3)%len(pieces)])
			b.WriteString(filler((i * 37 * (k + 1)) % 300))
		}
		texts = append(texts, b.String())
	}
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	ref := make([]Requests, len(texts))
	for i, s := range texts {
		ref[i] = DetectRequests(s)
	}
	runtime.GOMAXPROCS(8)
	for r := 0; r < 2; r++ {
		for i, s := range texts {
			if got := DetectRequests(s); !reflect.DeepEqual(got, ref[i]) {
				t.Errorf("text %d, run %d: got %+v, want %+v", i, r, got, ref[i])
			}
		}
	}
}
