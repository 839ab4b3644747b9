package remote

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
)

// The ssh_config parser reads the files an Include names itself, by name,
// while it parses (with os.ReadFile: a FIFO there would block it forever).
// includeChecker walks the same Includes first, resolved the way the
// parser resolves them, and refuses any file that is not a regular file
// before the parser is handed the configuration. It over-approximates: a
// line it is unsure of is checked both ways.

// maxIncludeDepth is the parser's limit on nested Includes: it refuses the
// next level without reading it.
const maxIncludeDepth = 5

// includeChecker checks the files that Include lines reach.
type includeChecker struct {
	home string         // the parser's home directory: the real user's, not WithSSHHome
	seen map[string]int // file → the shallowest depth it was checked at
}

// check checks the Includes of file (content b) read at depth; system
// says whether the parser resolves its relative Includes under /etc/ssh.
func (c *includeChecker) check(file string, b []byte, system bool, depth int) error {
	if depth+1 > maxIncludeDepth {
		return nil // the parser stops here with its own error
	}
	for _, dir := range includeDirectives(b) {
		matches, err := filepath.Glob(c.resolve(dir, system))
		if err != nil {
			continue // a bad pattern: the parser reports it
		}
		for _, m := range matches {
			if d, ok := c.seen[m]; ok && d <= depth+1 {
				continue
			}
			c.seen[m] = depth + 1
			inc, err := readRegular(m)
			if err != nil {
				return fmt.Errorf("%s: Include %s: %w; an Include must name regular files", file, dir, err)
			}
			if err := c.check(m, inc, parserSystemFile(m), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolve turns an Include argument into the pattern the parser globs.
func (c *includeChecker) resolve(dir string, system bool) string {
	switch {
	case filepath.IsAbs(dir):
		return dir
	case system:
		return filepath.Join("/etc/ssh", dir)
	case strings.HasPrefix(dir, "~/"):
		return filepath.Join(c.home, dir[2:])
	}
	return filepath.Join(c.home, ".ssh", dir)
}

// parserSystemFile reports whether the parser takes file for a system
// file (its relative Includes then resolve under /etc/ssh).
func parserSystemFile(file string) bool {
	return strings.HasPrefix(filepath.Clean(file), "/etc/ssh")
}

// includeDirectives returns the arguments of every Include line of b, as
// the parser splits them (on single spaces) and also split on any white
// space, so that no file the parser reads is missed.
func includeDirectives(b []byte) []string {
	var out []string
	text := string(bytes.Runes(b)) // the parser's lexer reads runes: invalid bytes become U+FFFD
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimLeft(line, " \t")
		end := strings.IndexAny(line, " \t=\r")
		if end < 0 || !strings.EqualFold(line[:end], "include") {
			continue
		}
		v := strings.TrimLeft(line[end:], " \t")
		v = strings.TrimLeft(strings.TrimPrefix(v, "="), " \t")
		v, _, _ = strings.Cut(v, "#")
		v = strings.TrimSuffix(v, "\r")
		seen := map[string]bool{"": true}
		for _, d := range append(strings.Split(v, " "), strings.Fields(v)...) {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}
