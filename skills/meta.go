package skills

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Meta is a SKILL.md's YAML frontmatter.
type Meta struct {
	Name          string            // "name": should equal the skill's directory name
	Description   string            // "description": what the skill does and when to use it
	License       string            // "license"
	Compatibility string            // "compatibility": environment requirements
	Metadata      map[string]string // "metadata": arbitrary string keys and values
	AllowedTools  string            // "allowed-tools": space-separated; a YAML list is joined with spaces
	Unknown       []string          // keys outside the spec, sorted
}

var (
	// ErrFrontmatter is wrapped by every ParseMeta error.
	ErrFrontmatter = errors.New("SKILL.md frontmatter does not parse")
	// ErrSpec is wrapped by every Meta.Validate error.
	ErrSpec = errors.New("SKILL.md violates the Agent Skills spec")
)

// ParseMeta reads the YAML frontmatter of a SKILL.md: the block between a
// first line "---" and the next line "---" (a UTF-8 byte order mark and CRLF
// line ends are accepted). A file without frontmatter yields a zero Meta and
// no error. Scalars must be strings; metadata must map strings to strings.
func ParseMeta(skillMD []byte) (Meta, error) {
	if !utf8.Valid(skillMD) {
		return Meta{}, fmt.Errorf("%w: not valid UTF-8", ErrFrontmatter)
	}
	text := strings.TrimPrefix(string(skillMD), "\uFEFF")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	first, rest, _ := strings.Cut(text, "\n")
	if strings.TrimRight(first, " \t") != "---" {
		return Meta{}, nil
	}
	// Find the closing line in one scan and slice once: a SKILL.md of a
	// million short lines must not cost a million copies.
	end := -1
	for i := 0; i <= len(rest); {
		j := strings.IndexByte(rest[i:], '\n')
		line := rest[i:]
		if j >= 0 {
			line = rest[i : i+j]
		}
		if strings.TrimRight(line, " \t") == "---" {
			end = i
			break
		}
		if j < 0 {
			break
		}
		i += j + 1
	}
	if end < 0 {
		return Meta{}, fmt.Errorf("%w: no closing --- line", ErrFrontmatter)
	}
	block := rest[:end]
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader([]byte(block))).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Meta{}, nil // empty frontmatter
		}
		return Meta{}, fmt.Errorf("%w: %v", ErrFrontmatter, err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return Meta{}, fmt.Errorf("%w: frontmatter is not a mapping", ErrFrontmatter)
	}
	var m Meta
	seen := map[string]bool{}
	nodes := doc.Content[0].Content
	for i := 0; i+1 < len(nodes); i += 2 {
		k, v := nodes[i], nodes[i+1]
		if k.Kind != yaml.ScalarNode {
			return Meta{}, fmt.Errorf("%w: line %d: a key is not a string", ErrFrontmatter, k.Line)
		}
		key := k.Value
		if seen[key] {
			return Meta{}, fmt.Errorf("%w: line %d: key %q appears twice", ErrFrontmatter, k.Line, key)
		}
		seen[key] = true
		var err error
		switch key {
		case "name":
			m.Name, err = scalar(key, v)
		case "description":
			m.Description, err = scalar(key, v)
		case "license":
			m.License, err = scalar(key, v)
		case "compatibility":
			m.Compatibility, err = scalar(key, v)
		case "allowed-tools":
			m.AllowedTools, err = tools(v)
		case "metadata":
			m.Metadata, err = stringMap(v)
		default:
			m.Unknown = append(m.Unknown, key)
		}
		if err != nil {
			return Meta{}, err
		}
	}
	sort.Strings(m.Unknown)
	return m, nil
}

func scalar(key string, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return "", fmt.Errorf("%w: line %d: %s must be a string", ErrFrontmatter, v.Line, key)
	}
	return v.Value, nil
}

func tools(v *yaml.Node) (string, error) {
	if v.Kind != yaml.SequenceNode {
		return scalar("allowed-tools", v)
	}
	var out []string
	for _, item := range v.Content {
		s, err := scalar("allowed-tools", item)
		if err != nil {
			return "", err
		}
		out = append(out, s)
	}
	return strings.Join(out, " "), nil
}

func stringMap(v *yaml.Node) (map[string]string, error) {
	if v.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: line %d: metadata must be a mapping", ErrFrontmatter, v.Line)
	}
	out := make(map[string]string, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, err := scalar("a metadata key", v.Content[i])
		if err != nil {
			return nil, err
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%w: line %d: metadata key %q appears twice", ErrFrontmatter, v.Content[i].Line, k)
		}
		if out[k], err = scalar("metadata "+k, v.Content[i+1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Validate checks the frontmatter against the Agent Skills spec: name 1–64
// characters of [a-z0-9-], no leading, trailing or double hyphen, equal to
// the skill's directory name; description 1–1024 characters; compatibility at
// most 500; no keys but name, description, license, compatibility, metadata
// and allowed-tools. Every violation is listed in one error wrapping ErrSpec.
func (m Meta) Validate(dirName string) error {
	var errs []string
	switch n := utf8.RuneCountInString(m.Name); {
	case n == 0:
		errs = append(errs, "name is missing")
	case n > 64:
		errs = append(errs, fmt.Sprintf("name is %d characters; at most 64", n))
	}
	for _, r := range m.Name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			errs = append(errs, fmt.Sprintf("name %q may hold only a-z, 0-9 and -", m.Name))
			break
		}
	}
	if strings.HasPrefix(m.Name, "-") || strings.HasSuffix(m.Name, "-") || strings.Contains(m.Name, "--") {
		errs = append(errs, fmt.Sprintf("name %q has a leading, trailing or double hyphen", m.Name))
	}
	if m.Name != "" && m.Name != dirName {
		errs = append(errs, fmt.Sprintf("name %q differs from the directory name %q", m.Name, dirName))
	}
	switch n := utf8.RuneCountInString(strings.TrimSpace(m.Description)); {
	case n == 0:
		errs = append(errs, "description is missing")
	case n > 1024:
		errs = append(errs, fmt.Sprintf("description is %d characters; at most 1024", n))
	}
	if n := utf8.RuneCountInString(m.Compatibility); n > 500 {
		errs = append(errs, fmt.Sprintf("compatibility is %d characters; at most 500", n))
	}
	for _, k := range m.Unknown {
		errs = append(errs, fmt.Sprintf("key %q is not in the spec", k))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrSpec, strings.Join(errs, "; "))
}

// description returns the prompt form of a description: see promptText;
// at most 1024 characters.
func description(s string) string {
	s = promptText(s)
	if utf8.RuneCountInString(s) > 1024 {
		s = string([]rune(s)[:1024])
	}
	return s
}

// promptText returns text a skill author controls in the form a prompt line
// may hold: format characters (Cf) dropped, so none can reorder or hide the
// text around it; other control characters and line or paragraph
// separators turned into spaces; white space collapsed and trimmed.
func promptText(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.Is(unicode.Cf, r):
			return -1
		case unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp):
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}
