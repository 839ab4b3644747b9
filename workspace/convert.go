package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/airlockdev/airlock/internal/gitexec"
)

// Checkout conversions. git keeps a file's content in a blob after the
// file's clean conversion (.gitattributes text, eol and crlf, ident,
// working-tree-encoding, a filter driver's clean command; core.autocrlf
// and core.eol) and writes a blob into the work tree after the reverse,
// the smudge. Restore does what the user's own git does in the work
// tree, with the user's configuration (gitexec.Cmd.UserConfig): a local
// file equals a blob when its bytes or its clean form do (the work
// tree's attributes as they are before anything is written), and a blob
// is written in its checkout form (the attributes as the .gitattributes
// files the Restore brings leave them). Without this, a repository with
// eol=crlf or a git-lfs file would read every converted local file as a
// local edit (Kept), and write LF where the user's checkout has CRLF.

// cleanIDs returns the blob id git would store for each local file of
// paths (git hash-object in the work tree, which runs the clean
// conversion and writes no object): all in one git hash-object
// --stdin-paths, or, when that fails (a filter driver that fails on one
// file), one git hash-object a file. A file whose id cannot be read is
// left out, and logged. The paths are regular files below directories,
// as statAt found them.
func cleanIDs(ctx context.Context, g *gitexec.Git, paths []string, log *slog.Logger) map[string]string {
	ids := make(map[string]string, len(paths))
	if len(paths) == 0 {
		return ids
	}
	var in strings.Builder
	for _, p := range paths {
		in.WriteString(quoteC(p))
		in.WriteByte('\n')
	}
	var out bytes.Buffer
	// core.safecrlf would make an irreversible conversion fatal; hashing
	// a file changes nothing, so it only warns here.
	err := g.Run(ctx, gitexec.Cmd{Args: []string{"-c", "core.safecrlf=false", "hash-object", "--stdin-paths"}, Stdin: strings.NewReader(in.String()), Stdout: &out, UserConfig: true})
	if f := strings.Fields(out.String()); err == nil && len(f) == len(paths) {
		for i, p := range paths {
			ids[p] = f[i]
		}
		return ids
	}
	for _, p := range paths {
		var one bytes.Buffer
		err := g.Run(ctx, gitexec.Cmd{Args: []string{"-c", "core.safecrlf=false", "hash-object", "--", p}, Stdout: &one, UserConfig: true})
		id := strings.TrimSpace(one.String())
		if err == nil && id == "" {
			err = errors.New("git hash-object printed no id")
		}
		if err != nil {
			log.Warn("reading a local file's clean form (git hash-object) failed: it is compared by its bytes (a local edit unless they are a blob's)", "path", p, "error", err)
			continue
		}
		ids[p] = id
	}
	return ids
}

// quoteC quotes p as git reads a quoted path on its standard input
// (unquote_c_style): the one spelling every name has, newlines included.
func quoteC(p string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// convAttrs are the attributes that decide a checkout conversion.
var convAttrs = []string{"text", "eol", "crlf", "filter", "ident", "working-tree-encoding"}

// convertedOnCheckout returns the paths whose blobs git may convert when
// it checks them out. It may name a path git then leaves alone (git
// decides: text=auto leaves a binary blob alone); it never leaves out
// one git converts.
func convertedOnCheckout(ctx context.Context, g *gitexec.Git, paths []string) (map[string]bool, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	var cfg bytes.Buffer
	err := g.Run(ctx, gitexec.Cmd{Args: []string{"config", "-z", "--get-regexp", `^core\.(autocrlf|eol)$`}, Stdout: &cfg, UserConfig: true})
	if err != nil && gitexec.Status(err) != 1 { // 1: neither is set
		return nil, fmt.Errorf("workspace: reading core.autocrlf and core.eol: %w", err)
	}
	var autocrlf, eol string
	for _, kv := range strings.Split(cfg.String(), "\x00") {
		k, v, _ := strings.Cut(kv, "\n")
		switch strings.ToLower(k) {
		case "core.autocrlf":
			autocrlf = strings.ToLower(v)
		case "core.eol":
			eol = strings.ToLower(v)
		}
	}
	var in strings.Builder
	for _, p := range paths {
		in.WriteString(p)
		in.WriteByte(0)
	}
	var out bytes.Buffer
	args := append([]string{"check-attr", "-z", "--stdin"}, convAttrs...)
	if err := g.Run(ctx, gitexec.Cmd{Args: args, Stdin: strings.NewReader(in.String()), Stdout: &out, UserConfig: true}); err != nil {
		return nil, fmt.Errorf("workspace: reading the work tree's attributes (git check-attr): %w", err)
	}
	f := strings.Split(out.String(), "\x00")
	if len(f) != 3*len(paths)*len(convAttrs)+1 {
		return nil, fmt.Errorf("workspace: git check-attr gave %d fields for %d paths", len(f)-1, len(paths))
	}
	conv := map[string]bool{}
	for i, p := range paths {
		a := map[string]string{}
		for j := range convAttrs {
			rec := f[3*(i*len(convAttrs)+j):]
			if rec[0] != p {
				return nil, fmt.Errorf("workspace: git check-attr answered for %q, asked for %q", rec[0], p)
			}
			a[rec[1]] = rec[2]
		}
		if converts(a, autocrlf, eol) {
			conv[p] = true
		}
	}
	return conv, nil
}

// converts reports whether git may convert a blob with attributes a on
// checkout, with core.autocrlf and core.eol (lower case, "" when unset).
func converts(a map[string]string, autocrlf, coreEOL string) bool {
	given := func(v string) bool { return v != "unspecified" && v != "unset" }
	if given(a["filter"]) || a["ident"] == "set" || given(a["working-tree-encoding"]) {
		return true
	}
	text, eol := a["text"], a["eol"]
	if text == "unspecified" { // the older crlf attribute
		switch a["crlf"] {
		case "set":
			text = "set"
		case "unset":
			text = "unset"
		case "input":
			text, eol = "set", "lf"
		}
	}
	switch {
	case text == "unset":
		return false
	case eol == "crlf":
		return true
	case eol == "lf":
		return false
	}
	switch autocrlf {
	case "", "false", "no", "off", "0":
		return text != "unspecified" && coreEOL == "crlf"
	case "input":
		return false
	}
	return true // true, or a value git reads in some way this does not
}

// writeBlobs hands each path's blob (id(p)) to write: in its checkout
// form where the work tree's attributes, as they are now, may convert it
// (one git cat-file --filters each), else as its bytes (one git cat-file
// --batch for all).
func writeBlobs(ctx context.Context, g *gitexec.Git, paths []string, id func(string) string, write func(p string, body io.Reader) error) error {
	conv, err := convertedOnCheckout(ctx, g, paths)
	if err != nil {
		return err
	}
	raw := slices.DeleteFunc(slices.Clone(paths), func(p string) bool { return conv[p] })
	if err := readBlobs(ctx, g, raw, id, func(p string, _ int64, body io.Reader) error { return write(p, body) }); err != nil {
		return err
	}
	for _, p := range paths {
		if !conv[p] {
			continue
		}
		if err := readConverted(ctx, g, p, id(p), func(body io.Reader) error { return write(p, body) }); err != nil {
			return err
		}
	}
	return nil
}

// convertError is a blob's conversion for the work tree (its filter
// driver) that failed.
type convertError struct {
	path string
	err  error
}

func (e *convertError) Error() string {
	return fmt.Sprintf("workspace: converting %s for the work tree (git cat-file --filters, which runs its filter driver) failed: %v; nothing was written to it and the sandbox still holds it: fix the driver (or the attribute that names it) and run Restore again", e.path, e.err)
}

func (e *convertError) Unwrap() error { return e.err }

// readConverted streams blob id, converted for path p of the work tree
// (git cat-file --filters), to fn. The reader fails, rather than ends,
// when git does (a *convertError): a filter that fails never yields a
// short file. git-lfs's smudge would fetch a pointer's object from the
// LFS server of the repository's remote: it is told not to.
func readConverted(ctx context.Context, g *gitexec.Git, p, id string, fn func(io.Reader) error) error {
	c := gitexec.Cmd{Args: []string{"cat-file", "--filters", "--path=" + p, id}, Env: []string{"GIT_LFS_SKIP_SMUDGE=1"}, UserConfig: true}
	return readGit(ctx, g, c, func(err error) error { return &convertError{path: p, err: err} }, fn)
}
