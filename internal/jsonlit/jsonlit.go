// Package jsonlit reads JSON for the strict decoders of session records,
// workspace references and the agent tool's arguments, refusing what
// encoding/json lets through silently: an object that gives a key twice
// or is followed by more data (Object), and an escaped lone UTF-16
// surrogate ("\ud800") in a string literal, which it decodes to U+FFFD
// (CheckSurrogates).
package jsonlit

import (
	"fmt"
	"strconv"
)

// CheckSurrogates rejects \u escapes that encode a lone UTF-16 surrogate
// in raw, a syntactically valid JSON string literal (quotes included). A
// high surrogate followed by an escaped low one is a valid pair.
func CheckSurrogates(raw []byte) error {
	hex4 := func(i int) rune {
		if i+4 > len(raw) {
			return -1
		}
		v, err := strconv.ParseUint(string(raw[i:i+4]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(v)
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r := hex4(i + 1)
		i += 4
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo := hex4(i + 3); lo >= 0xDC00 && lo < 0xE000 {
					i += 6
					continue
				}
			}
			return fmt.Errorf("escaped lone surrogate %U (invalid UTF-16)", r)
		case r >= 0xDC00 && r < 0xE000:
			return fmt.Errorf("escaped lone surrogate %U (invalid UTF-16)", r)
		}
	}
	return nil
}
