package jsonlit

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestObject(t *testing.T) {
	members, err := Object([]byte(" {\"b\": [1, {\"x\":2}] ,\"a\":\"s\",\n\"\\u0063\":null}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range members {
		got = append(got, m.Key+"="+string(m.Value))
	}
	want := `b=[1, {"x":2}] a="s" c=null`
	if strings.Join(got, " ") != want {
		t.Fatalf("members %q, want %q", strings.Join(got, " "), want)
	}

	refused := []struct{ name, in, err string }{
		{"empty", ``, "not a JSON object: unexpected end of input"},
		{"array", `[]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"cut in a key", `{"a`, "unexpected end of input"},
		{"cut after a value", `{"a":1`, "unexpected end of input"},
		{"cut in a value", `{"a":[1`, `key "a": unexpected end of input`},
		{"bad value", `{"a":tru}`, `key "a": invalid character '}' in literal true (expecting 'e')`},
		{"duplicate", `{"a":1,"a":1}`, `duplicate key "a"`},
		{"duplicate once unescaped", `{"a":1,"\u0061":2}`, `duplicate key "a"`},
		{"trailing object", `{}{}`, "trailing data after the object"},
		{"trailing garbage", `{} x`, "trailing data after the object"},
		{"trailing NUL", "{}\x00", "trailing data after the object"},
	}
	for _, tc := range refused {
		_, err := Object([]byte(tc.in))
		if err == nil || err.Error() != tc.err {
			t.Errorf("%s: Object(%q) = %v, want %q", tc.name, tc.in, err, tc.err)
		}
	}
	var dup *DuplicateKeyError
	if _, err := Object([]byte(`{"` + strings.Repeat("k", 100) + `":1,"` + strings.Repeat("k", 100) + `":2}`)); !errors.As(err, &dup) || dup.Key != strings.Repeat("k", 100) || err.Error() != `duplicate key "`+strings.Repeat("k", 80)+`…"` {
		t.Errorf("a long duplicate key: %v (%#v), want its whole key in the error and 80 bytes of it in the message", err, dup)
	}
}

// FuzzObject checks what Object accepts against encoding/json: one object
// whose keys are distinct, with the same values json.Unmarshal finds.
func FuzzObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[true,null]}`, `{"a":1,"a":2}`, `{"a":{"a":1}} `, `{"\u00e9":"x"}`, `[1]`, `{}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		members, err := Object(data)
		var m map[string]json.RawMessage
		jerr := json.Unmarshal(data, &m)
		if err != nil {
			return
		}
		if jerr != nil || m == nil {
			t.Fatalf("Object took %q, encoding/json refuses it as an object: %v", data, jerr)
		}
		if len(members) != len(m) {
			t.Fatalf("%q: %d members, encoding/json has %d keys", data, len(members), len(m))
		}
		for _, mb := range members {
			v, ok := m[mb.Key]
			if !ok || !bytes.Equal(bytes.TrimSpace(v), mb.Value) {
				t.Fatalf("%q: key %q is %q, encoding/json has %q", data, mb.Key, mb.Value, v)
			}
		}
	})
}
