package jsonlit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// Member is one member of a JSON object: its key, unescaped, and its value
// as raw JSON with the white space around it trimmed.
type Member struct {
	Key   string
	Value json.RawMessage
}

// DuplicateKeyError is Object's refusal of an object that gives a key
// twice (encoding/json would keep the last value without a word).
type DuplicateKeyError struct {
	Key string // unescaped
}

func (e *DuplicateKeyError) Error() string {
	return "duplicate key " + strconv.Quote(Clip(e.Key))
}

// Object reads data as exactly one JSON object and returns its members in
// the order given. It refuses what encoding/json would take silently, a
// key given twice (a *DuplicateKeyError; keys compare after unescaping)
// and data after the object, and anything that is not one object; a
// syntax error cut short by the end of data says "unexpected end of
// input". Keys are not checked otherwise: which keys are known, and in
// which letter case, is the caller's rule.
func Object(data []byte) ([]Member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", syntaxErr(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var members []Member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxErr(err)
		}
		key, ok := tok.(string)
		if !ok { // encoding/json's Token refuses a non-string key itself
			return nil, errors.New("an object key is not a string")
		}
		if seen[key] {
			return nil, &DuplicateKeyError{Key: key}
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("key %s: %w", strconv.Quote(Clip(key)), syntaxErr(err))
		}
		members = append(members, Member{Key: key, Value: bytes.TrimSpace(raw)})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, syntaxErr(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the object")
	}
	return members, nil
}

// Clip cuts s to at most 80 bytes, on a rune boundary, for a message,
// marking a cut with "…".
func Clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func syntaxErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("unexpected end of input")
	}
	return err
}
