package mcptool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// MaxNesting is the deepest nesting of objects and arrays a message may
// have. The SDK drops the whole session (or, over HTTP, answers 400) on a
// message nested more than 1,000 levels; ServeStdio, ServeConn and Handler
// check every message first and answer a deeper one themselves, as a tool
// error when the depth is in one argument of a tool call.
const MaxNesting = 256

// verdict is what guard found in one message; a zero answer passes it on.
type verdict struct {
	answer []byte // the JSON-RPC message that answers the line instead of the server
	ok     bool   // the message may go to the SDK
	result bool   // answer is a result (a tool error), not a JSON-RPC error
	log    string // why the message was not passed on
}

// message is what a depth-bounded token scan reads of a JSON-RPC message.
type message struct {
	id        json.RawMessage // a string or number id; nil: none or unusable
	hasID     bool            // an "id" key is present
	method    string
	hasMethod bool
	version   string
	tool      string // params.name
	deepArg   string // the argument nested deepest, when it is too deep
	argDepth  int
}

// guard checks one message (one line of a stream, one HTTP body) before the
// SDK reads it: JSON, one object, "jsonrpc":"2.0", a string or number id,
// at most MaxNesting levels deep.
func guard(line []byte) verdict {
	if len(bytes.TrimSpace(line)) == 0 {
		return verdict{log: "empty line"}
	}
	m, err := scanMessage(line)
	if err != nil {
		return verdict{answer: rpcError(nil, -32700, "parse error: "+err.Error()+"; send one JSON-RPC 2.0 message per line"), log: err.Error()}
	}
	if d := nesting(line); d > MaxNesting {
		return m.tooDeep(d)
	}
	switch {
	case m.version != "2.0":
		return m.invalid("the message is not JSON-RPC 2.0: set \"jsonrpc\":\"2.0\"")
	case m.hasID && m.id == nil:
		return m.invalid("the id is not a string or a number")
	case !m.hasMethod && !m.hasID:
		return m.invalid("the message has neither a method nor an id")
	}
	return verdict{ok: true}
}

// invalid answers -32600 with the message's id (null when it has none).
func (m message) invalid(why string) verdict {
	if m.hasMethod && !m.hasID {
		return verdict{log: "notification dropped: " + why} // a notification is never answered
	}
	return verdict{answer: rpcError(m.id, -32600, "invalid request: "+why), log: why}
}

// tooDeep answers a message nested d levels: a tool error naming the
// argument when one argument of a tool call is what is too deep, else an
// invalid request or invalid params error.
func (m message) tooDeep(d int) verdict {
	why := fmt.Sprintf("the message nests objects and arrays %d levels deep, more than %d", d, MaxNesting)
	switch {
	case m.hasMethod && !m.hasID:
		return verdict{log: "notification dropped: " + why}
	case m.method == "tools/call" && m.id != nil && m.deepArg != "":
		text := fmt.Sprintf("%s: %s nests arrays or objects more than %d levels deep; pass it as a JSON string.",
			printable(m.tool, "the tool"), printable(m.deepArg, "an argument"), MaxNesting)
		res, _ := json.Marshal(map[string]any{"content": []any{map[string]string{"type": "text", "text": text}}, "isError": true})
		msg, _ := json.Marshal(rpcMessage{Version: "2.0", ID: m.id, Result: res})
		return verdict{answer: msg, result: true, log: why}
	case m.method == "tools/call" && m.id != nil:
		return verdict{answer: rpcError(m.id, -32602, "invalid params: "+why), log: why}
	}
	return verdict{answer: rpcError(m.id, -32600, "invalid request: "+why), log: why}
}

// printable returns s when it is a short line of printable characters, else
// alt: an agent's text is echoed only when it cannot garble the message.
func printable(s, alt string) string {
	if s == "" || len(s) > 64 || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return alt
	}
	return s
}

func rpcError(id json.RawMessage, code int, text string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	msg, _ := json.Marshal(rpcMessage{Version: "2.0", ID: id, Error: &rpcErr{Code: code, Message: text}})
	return msg
}

// rpcMessage is a JSON-RPC 2.0 response.
type rpcMessage struct {
	Version string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcErr         `json:"error,omitempty"`
}

type rpcErr struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// nesting returns the deepest nesting of objects and arrays in data, strings
// skipped, as the SDK counts it.
func nesting(data []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, b := range data {
		switch {
		case inString && escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case inString:
			inString = b != '"'
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			depth++
			deepest = max(deepest, depth)
		case (b == '}' || b == ']') && depth > 0:
			depth--
		}
	}
	return deepest
}

// scanMessage reads line as one JSON object with a token scan, which has no
// depth limit of its own and keeps no value deeper than a scalar: the id,
// method, version and tool name, and the argument nested deepest.
func scanMessage(line []byte) (message, error) {
	var m message
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return m, errors.New("the line is not JSON")
	}
	if tok != json.Delim('{') {
		if _, err := skipRest(dec, tok); err != nil {
			return m, errors.New("the line is not JSON")
		}
		return m, errors.New("the line is not one JSON object (batches are not supported)")
	}
	err = eachKey(dec, func(key string) error {
		switch key {
		case "id":
			m.hasID = true
			return scalar(dec, func(v any) { m.id = idOf(v) })
		case "method":
			m.hasMethod = true
			return scalar(dec, func(v any) { m.method, _ = v.(string) })
		case "jsonrpc":
			return scalar(dec, func(v any) { m.version, _ = v.(string) })
		case "params":
			return m.scanParams(dec)
		}
		_, err := skipValue(dec)
		return err
	})
	if err == nil {
		if _, end := dec.Token(); end != io.EOF {
			err = errors.New("trailing data")
		}
	}
	if err != nil {
		return m, errors.New("the line is not JSON")
	}
	return m, nil
}

// scanParams reads params.name and the depth of each of params.arguments.
func (m *message) scanParams(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		_, err := skipRest(dec, tok)
		return err
	}
	return eachKey(dec, func(key string) error {
		switch key {
		case "name":
			return scalar(dec, func(v any) { m.tool, _ = v.(string) })
		case "arguments":
			tok, err := dec.Token()
			if err != nil || tok != json.Delim('{') {
				if err == nil {
					_, err = skipRest(dec, tok)
				}
				return err
			}
			return eachKey(dec, func(arg string) error {
				d, err := skipValue(dec)
				// message, params, arguments: three levels above the value
				if err == nil && d+3 > MaxNesting && d > m.argDepth {
					m.deepArg, m.argDepth = arg, d
				}
				return err
			})
		}
		_, err := skipValue(dec)
		return err
	})
}

// eachKey calls f for each key of the object whose '{' was just read, f
// reading the value, then reads the closing '}'.
func eachKey(dec *json.Decoder, f func(key string) error) error {
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return errors.New("an object key is not a string")
		}
		if err := f(key); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

// scalar reads one value and hands it to f when it is no object or array.
func scalar(dec *json.Decoder, f func(any)) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if _, ok := tok.(json.Delim); ok {
		f(nil)
		_, err := skipRest(dec, tok)
		return err
	}
	f(tok)
	return nil
}

// idOf returns a JSON-RPC id as JSON: a string or a number, else nil.
func idOf(v any) json.RawMessage {
	switch v := v.(type) {
	case string:
		b, _ := json.Marshal(v)
		return b
	case json.Number:
		return json.RawMessage(v)
	}
	return nil
}

// skipValue reads one value and returns its nesting depth (0: a scalar).
func skipValue(dec *json.Decoder) (int, error) {
	tok, err := dec.Token()
	if err != nil {
		return 0, err
	}
	return skipRest(dec, tok)
}

// skipRest reads the rest of the value whose first token is tok.
func skipRest(dec *json.Decoder, tok json.Token) (int, error) {
	if d, ok := tok.(json.Delim); !ok || (d != '{' && d != '[') {
		return 0, nil
	}
	depth, deepest := 1, 1
	for depth > 0 {
		tok, err := dec.Token()
		if err != nil {
			return 0, err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return deepest, nil
}
