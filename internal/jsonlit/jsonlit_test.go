package jsonlit

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestCheckSurrogates(t *testing.T) {
	tests := []struct {
		raw string
		ok  bool
	}{
		{`""`, true},
		{`"\\ud800"`, true}, // an escaped backslash, then plain text
		{`"\ud83e\udd80"`, true},
		{`"\uD83E\uDD80"`, true},
		{`"\ud7ff\ue000"`, true},
		{`"\ud800"`, false},
		{`"\ud800\u0041"`, false},
		{`"\ud800\ud800"`, false},
		{`"\udfff"`, false},
		{`"x\\\udc00"`, false},
		{`"\ud800x"`, false},
	}
	for _, tt := range tests {
		if err := CheckSurrogates([]byte(tt.raw)); (err == nil) != tt.ok {
			t.Errorf("CheckSurrogates(%s) = %v, want ok=%v", tt.raw, err, tt.ok)
		}
	}
}

// FuzzCheckSurrogates: a literal that passes decodes without U+FFFD being
// invented — every U+FFFD in the result was in the input, literally or as
// \ufffd.
func FuzzCheckSurrogates(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud83e\udd80"`, `"\ud800"`, `"\\ud800"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var s string
		if json.Unmarshal([]byte(raw), &s) != nil || CheckSurrogates([]byte(raw)) != nil {
			return
		}
		if !utf8.ValidString(s) {
			t.Fatalf("%q decoded to invalid UTF-8", raw)
		}
		want := 0
		for i := 0; i < len(raw); i++ {
			if raw[i] == '\\' && i+1 < len(raw) {
				if raw[i+1] == 'u' && i+6 <= len(raw) && (raw[i+2:i+6] == "fffd" || raw[i+2:i+6] == "FFFD") {
					want++
				}
				i++
			}
		}
		for _, r := range raw {
			if r == utf8.RuneError {
				want++
			}
		}
		got := 0
		for _, r := range s {
			if r == utf8.RuneError {
				got++
			}
		}
		if got > want {
			t.Fatalf("%q passed but decoded to %q with %d U+FFFD, the input had %d", raw, s, got, want)
		}
	})
}
