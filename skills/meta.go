package skills

import (
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
// The block must be valid YAML: see [ParseMetaLenient] for the reading
// [Materialize] uses in default mode.
func ParseMeta(skillMD []byte) (Meta, error) {
	m, _, err := parseMeta(skillMD, false)
	return m, err
}

// ParseMetaLenient reads the frontmatter as [ParseMeta] does, except that
// when the block is not valid YAML it tries once more with every top-level
// line "key: value" whose value is a plain scalar holding ": " (or ending
// in ":") read as plain text to the end of the line, as authors mean and
// agent CLIs read it: "description: Use when: x" gives the description
// "Use when: x". Lenient lists the keys read that way (nil when the block
// was valid YAML); the error, when even that fails, is ParseMeta's.
func ParseMetaLenient(skillMD []byte) (m Meta, lenient []string, err error) {
	m, notes, err := parseMeta(skillMD, true)
	return m, notes.lenient, err
}

// parseNotes is what parseMeta noticed besides the Meta.
type parseNotes struct {
	none    bool     // the SKILL.md has no frontmatter
	lenient []string // keys read as plain text to the end of their line
}

// errNoFrontmatter marks, inside the package, a SKILL.md without a first
// line "---"; ParseMeta reports it as a zero Meta and no error.
var errNoFrontmatter = errors.New("SKILL.md has no frontmatter (a first line ---)")

func parseMeta(skillMD []byte, lenient bool) (Meta, parseNotes, error) {
	block, err := frontmatter(skillMD)
	if errors.Is(err, errNoFrontmatter) {
		return Meta{}, parseNotes{none: true}, nil
	}
	if err != nil {
		return Meta{}, parseNotes{}, err
	}
	m, err := decodeMeta(block)
	if err == nil || !lenient || !errors.Is(err, errYAML) {
		return m, parseNotes{}, err
	}
	fixed, keys := plainLines(block)
	if len(keys) == 0 {
		return Meta{}, parseNotes{}, err
	}
	m, err2 := decodeMeta(fixed)
	if err2 != nil {
		return Meta{}, parseNotes{}, err // the author's YAML error, not the repair's
	}
	return m, parseNotes{lenient: keys}, nil
}

// frontmatter returns the block between the first line "---" and the next
// line "---", or errNoFrontmatter.
func frontmatter(skillMD []byte) (string, error) {
	if !utf8.Valid(skillMD) {
		return "", fmt.Errorf("%w: not valid UTF-8", ErrFrontmatter)
	}
	text := strings.TrimPrefix(string(skillMD), "\uFEFF")
	// YAML breaks lines at CR LF, LF and a lone CR: so do the line scans
	// here and in the lenient reading (plainLines).
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	first, rest, _ := strings.Cut(text, "\n")
	if strings.TrimRight(first, " \t") != "---" {
		return "", errNoFrontmatter
	}
	// Find the closing line in one scan and slice once: a SKILL.md of a
	// million short lines must not cost a million copies.
	for i := 0; i <= len(rest); {
		j := strings.IndexByte(rest[i:], '\n')
		line := rest[i:]
		if j >= 0 {
			line = rest[i : i+j]
		}
		if strings.TrimRight(line, " \t") == "---" {
			return rest[:i], nil
		}
		if j < 0 {
			break
		}
		i += j + 1
	}
	return "", fmt.Errorf("%w: no closing --- line", ErrFrontmatter)
}

// errYAML marks a block that is not valid YAML, the one failure a lenient
// reading may repair.
var errYAML = errors.New("not valid YAML")

func decodeMeta(block string) (Meta, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(strings.NewReader(block)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Meta{}, nil // empty frontmatter
		}
		return Meta{}, fmt.Errorf("%w: %w: %v", ErrFrontmatter, errYAML, err)
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
		if err := m.set(key, v); err != nil {
			return Meta{}, err
		}
	}
	sort.Strings(m.Unknown)
	return m, nil
}

func (m *Meta) set(key string, v *yaml.Node) error {
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
	return err
}

// plainLines rewrites each top-level line "key: value" whose value is a
// plain scalar (it starts with no YAML indicator) holding ": " or ending in
// ":" — invalid YAML, and what authors write — as "key: <value as a
// double-quoted scalar>", the value taken to the end of the line (trailing
// blanks dropped; a " #" in it is text, not a comment). It returns the new
// block and the keys rewritten.
func plainLines(block string) (string, []string) {
	lines := strings.Split(block, "\n")
	var keys []string
	for i, line := range lines {
		key, value, ok := strings.Cut(line, ":")
		if !ok || key == "" || strings.TrimLeft(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
			continue
		}
		if value == "" || (value[0] != ' ' && value[0] != '\t') {
			continue
		}
		value = strings.Trim(value, " \t")
		if value == "" || strings.ContainsRune("\"'[]{}|>&*!%@#,`", rune(value[0])) ||
			(!strings.Contains(value, ": ") && !strings.HasSuffix(value, ":")) {
			continue
		}
		quoted := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(value)
		lines[i] = key + `: "` + quoted + `"`
		keys = append(keys, key)
	}
	return strings.Join(lines, "\n"), keys
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
// characters, each a lowercase letter (any script: "i18n-données" is valid,
// as in the spec's reference validator), a digit or "-", with no leading,
// trailing or double hyphen, equal to the skill's directory name byte for
// byte; description 1–1024 characters counted as written (surrounding white
// space included: the spec limits the value, and a quoted value keeps its
// spaces), not blank; compatibility at most 500; no keys but name,
// description, license, compatibility, metadata and allowed-tools. Names
// are not Unicode-normalized: a name that only passes once normalized (a
// decomposed accent, "e" + U+0301) is a violation. Every violation is listed
// in one error wrapping ErrSpec.
func (m Meta) Validate(dirName string) error {
	var errs []string
	switch n := utf8.RuneCountInString(m.Name); {
	case n == 0:
		errs = append(errs, "name is missing")
	case n > 64:
		errs = append(errs, fmt.Sprintf("name is %d characters; at most 64", n))
	}
	for _, r := range m.Name {
		if !nameRune(r) {
			errs = append(errs, fmt.Sprintf("name %q may hold only lowercase letters, digits and - (found %q, %U)", m.Name, r, r))
			break
		}
	}
	if strings.HasPrefix(m.Name, "-") || strings.HasSuffix(m.Name, "-") || strings.Contains(m.Name, "--") {
		errs = append(errs, fmt.Sprintf("name %q has a leading, trailing or double hyphen", m.Name))
	}
	if m.Name != "" && m.Name != dirName {
		errs = append(errs, fmt.Sprintf("name %q differs from the directory name %q", m.Name, dirName))
	}
	switch n := utf8.RuneCountInString(m.Description); {
	case strings.TrimSpace(m.Description) == "":
		errs = append(errs, "description is missing (the agent is told only the skill's name)")
	case n > MaxDescription:
		errs = append(errs, fmt.Sprintf("description is %d characters; at most %d", n, MaxDescription))
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

// nameRune reports the characters a spec name may hold: "-", a decimal
// digit (any script), or a letter that is neither upper nor title case (so
// lowercase letters and letters of scripts without case).
func nameRune(r rune) bool {
	switch {
	case r == '-':
		return true
	case unicode.IsDigit(r):
		return true
	case unicode.IsLetter(r):
		return !unicode.IsUpper(r) && !unicode.IsTitle(r)
	}
	return false
}

// description returns the prompt form of a description (see promptText),
// cut to MaxDescription characters when it is longer (see Cut).
func description(s string) (string, *Cut) {
	return cutDescription(promptText(s), MaxDescription)
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
