package mcptool

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// FuzzDecodeRequest: whatever decodeRequest accepts is one JSON object
// whose member names are the tool's argument names, each spelled exactly
// and given once, and re-encoding the request decodes to the same request;
// whatever it refuses gets a message for the agent that starts with the
// tool's name.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(`{"contentRef":"a/b.pdf","filename":"b.pdf","contentType":"application/pdf","byteSize":15,"sha256":"00","title":"t","idempotencyKey":"k"}`)
	f.Add(`{"contentRef":"a","contentRef":"b"}`)
	f.Add(`{"CONTENTREF":"a"}`)
	f.Add(`{"content\u0052ef":"a","byteSize":6e0}`)
	f.Add(`{"byteSize":1e30}`)
	f.Add(`[1]`)
	f.Fuzz(func(t *testing.T, args string) {
		in, msg := decodeRequest("tool", json.RawMessage(args))
		if msg != "" {
			if !strings.HasPrefix(msg, "tool: ") {
				t.Fatalf("message %q does not name the tool", msg)
			}
			return
		}
		dec := json.NewDecoder(strings.NewReader(args))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("accepted %q, which is not an object", args)
		}
		var seen []string
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatalf("accepted %q: %v", args, err)
			}
			name := tok.(string)
			if !slices.Contains(argNames, name) || slices.Contains(seen, name) {
				t.Fatalf("accepted %q, whose member %q is not an argument name given once", args, name)
			}
			seen = append(seen, name)
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Fatalf("accepted %q: %v", args, err)
			}
		}
		again, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if back, msg := decodeRequest("tool", again); msg != "" || back != in {
			t.Fatalf("%q decodes to %+v, which re-encodes to %s and decodes to %+v (%s)", args, in, again, back, msg)
		}
	})
}
