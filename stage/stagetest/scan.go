package stagetest

import (
	"cmp"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// stagePath is the import path whose Asset type ScanSites looks for. ScanSites
// works on source text only and deliberately does not import package stage.
const stagePath = "github.com/airlockdev/airlock/stage"

// maxTypeDepth bounds alias chains (type A = B; type B = C; …) so that an
// invalid cycle in the scanned source cannot loop forever.
const maxTypeDepth = 32

// Site is one stage.Asset composite literal found by ScanSites.
type Site struct {
	// File is the path of the source file relative to the scanned
	// directory, slash-separated.
	File string
	// Line is the 1-based line on which the literal starts: its type
	// (stage.Asset in stage.Asset{…} and &stage.Asset{…}) or, for an element
	// whose type is elided, its opening brace.
	Line int
	// Name is the source text of the Name field's expression, for example
	// `"skills"` or `name`; `""` when the field is omitted (its zero value).
	Name string
	// Links is the Links field: "SkipLinks", "RejectLinks" or
	// "FollowLinksWithin" when the expression is that stage constant (under
	// any import name, without qualifier); "SkipLinks" when the field is
	// omitted (the zero value); otherwise the expression's source text.
	// An identifier that merely shares a constant's name but is declared in
	// the scanned package (a local constant or variable named RejectLinks)
	// is reported qualified by that package's name, e.g. "adapter.RejectLinks",
	// so it can never be mistaken for the stage constant.
	Links string
}

// isPolicy reports whether name is one of the stage.LinkPolicy constants
// that Links is normalized to.
func isPolicy(name string) bool {
	switch name {
	case "SkipLinks", "RejectLinks", "FollowLinksWithin":
		return true
	}
	return false
}

// ScanSites parses every Go source file under dir and returns every composite
// literal of type stage.Asset (import path github.com/airlockdev/airlock/stage),
// sorted by File, then Line, then position within the line. It lets a project
// pin, in a test, the reviewed link policy of every place that stages assets.
//
// Found:
//   - stage.Asset{…} and &stage.Asset{…} under any import name: the default
//     stage, a renamed import (st.Asset{…}) or a dot import (Asset{…});
//   - Asset{…} inside package stage itself (a file whose package clause is
//     stage in the directory whose import path, derived from the nearest
//     go.mod, is the stage package), including its internal tests;
//   - elements whose type is elided: []stage.Asset{{…}}, [N]stage.Asset,
//     []*stage.Asset{{…}}, map values, nested slices, and slices of a named
//     type declared in the scanned package (type Assets []stage.Asset);
//   - literals of a type alias of stage.Asset (type A = stage.Asset) declared
//     in the same package directory, at package level or inside a function;
//   - keyed literals in any field order, and positional literals read in the
//     field order Name, Source, Links, Exclude.
//
// Walk: dir itself is always scanned; below it, directories named vendor or
// testdata, or whose name starts with "." or "_", are skipped, and so are
// files whose name starts with "." or "_" (the rules of the go command).
// Test files (_test.go) are scanned, because tests may stage too. Build
// constraints are not evaluated: every .go file counts. Symbolic links to
// directories below dir are not followed (dir itself may be one); a symbolic
// link to a regular .go file is read, as the go command would compile it.
// Nested modules are scanned like any other directory.
//
// Errors: a file that does not parse fails the whole scan with an error that
// wraps an *fs.PathError (Op "parse", Path the file as walked under dir)
// whose Err is the parser's scanner.ErrorList. A missing dir yields the
// *fs.PathError of os.Stat (fs.ErrNotExist); a dir that is not a directory
// yields an *fs.PathError wrapping syscall.ENOTDIR. With no literal found,
// ScanSites returns nil, nil.
//
// Not guaranteed (ScanSites reads syntax; it does not type-check):
//   - values built without a literal (var a stage.Asset; a.Links = …) and
//     fields changed after the literal are not seen: review those by hand;
//   - a literal of a defined (non-alias) type whose underlying type is
//     stage.Asset (type T stage.Asset; T{…}) is not reported;
//   - aliases and named slice or map types declared in another package, and
//     generic types, are not followed;
//   - files excluded by build constraints, and files that parse but do not
//     compile, are reported like any other.
func ScanSites(dir string) ([]Site, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("stagetest: scan for stage.Asset literals: %w; pass an existing source directory", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("stagetest: scan for stage.Asset literals: %w; pass a source directory, not a file",
			&fs.PathError{Op: "scan", Path: dir, Err: syscall.ENOTDIR})
	}
	fset := token.NewFileSet()
	dirs, err := parseTree(fset, dir)
	if err != nil {
		return nil, err
	}
	var all []found
	for _, d := range dirs {
		isStageDir, err := isStagePackageDir(d.path)
		if err != nil {
			return nil, err
		}
		for _, pkg := range groupPackages(d.files, isStageDir) {
			for _, fc := range pkg.files {
				all = append(all, fc.scan(fset)...)
			}
		}
	}
	slices.SortFunc(all, func(a, b found) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.offset, b.offset))
	})
	var sites []Site
	for _, f := range all {
		sites = append(sites, f.Site)
	}
	return sites, nil
}

// found is a Site with its byte offset, which orders literals on one line.
type found struct {
	Site
	offset int
}

// parsedDir holds the parsed files of one directory.
type parsedDir struct {
	path  string // as walked (dir joined with the relative path)
	files []*fileCtx
}

// parseTree walks root and parses every Go source file, grouped by directory
// in walk order.
func parseTree(fset *token.FileSet, root string) ([]*parsedDir, error) {
	var dirs []*parsedDir
	byPath := map[string]*parsedDir{}
	walkRoot := root
	if info, err := os.Lstat(root); err == nil && info.Mode()&fs.ModeSymlink != 0 {
		// WalkDir does not descend into a root that is a link; a trailing
		// separator makes it resolve the link (the root only, as asked).
		walkRoot = root + string(filepath.Separator)
	}
	err := filepath.WalkDir(walkRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != walkRoot && skipDir(name) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		regular := d.Type().IsRegular()
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Stat(path)
			if err != nil {
				return err
			}
			regular = target.Mode().IsRegular()
		}
		if !regular {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		file, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return fmt.Errorf("stagetest: scan for stage.Asset literals: %w; fix the file, or move it under a testdata directory to leave it out",
				&fs.PathError{Op: "parse", Path: path, Err: err})
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		parent := filepath.Dir(path)
		pd := byPath[parent]
		if pd == nil {
			pd = &parsedDir{path: parent}
			byPath[parent] = pd
			dirs = append(dirs, pd)
		}
		pd.files = append(pd.files, &fileCtx{file: file, src: src, rel: filepath.ToSlash(rel)})
		return nil
	})
	if err != nil {
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) && pathErr.Op == "parse" {
			return nil, err
		}
		return nil, fmt.Errorf("stagetest: scan %s for stage.Asset literals: %w", root, err)
	}
	return dirs, nil
}

// skipDir reports whether the go command would ignore a directory by name.
func skipDir(name string) bool {
	return name == "vendor" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// isStagePackageDir reports whether dir's import path is stagePath. The import
// path comes from the nearest go.mod at or above dir; with no go.mod, a
// directory ending in /github.com/airlockdev/airlock/stage (a GOPATH layout)
// counts.
func isStagePackageDir(dir string) (bool, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, fmt.Errorf("stagetest: resolve %s: %w", dir, err)
	}
	for d := abs; ; {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		switch {
		case err == nil:
			rel, err := filepath.Rel(d, abs)
			if err != nil {
				return false, fmt.Errorf("stagetest: resolve %s against module root %s: %w", abs, d, err)
			}
			importPath := modulePath(data)
			if rel != "." {
				importPath += "/" + filepath.ToSlash(rel)
			}
			return importPath == stagePath, nil
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return false, fmt.Errorf("stagetest: read go.mod to find the import path of %s: %w", dir, err)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return strings.HasSuffix(filepath.ToSlash(abs), "/"+stagePath), nil
		}
		d = parent
	}
}

// modulePath returns the module path declared in a go.mod, or "".
func modulePath(gomod []byte) string {
	for line := range strings.Lines(string(gomod)) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module")
		if !ok || rest == "" || !strings.ContainsRune(" \t\"`", rune(rest[0])) {
			continue
		}
		if i := strings.Index(rest, "//"); i >= 0 {
			rest = rest[:i]
		}
		rest = strings.TrimSpace(rest)
		if unquoted, err := strconv.Unquote(rest); err == nil {
			rest = unquoted
		}
		return rest
	}
	return ""
}

// pkgCtx is one package (one package clause in one directory).
type pkgCtx struct {
	isStage bool                  // this is package stage itself
	scope   map[string]*ast.Ident // top-level declarations of the package, by name
	decls   map[*ast.Ident]*fileCtx
	files   []*fileCtx
}

// fileCtx is one parsed file and what its imports bind.
type fileCtx struct {
	file       *ast.File
	src        []byte
	rel        string
	pkg        *pkgCtx
	stageNames map[string]bool // local names of the stage import
	dot        bool            // stage is dot-imported
}

// groupPackages splits a directory's files by package clause and records the
// top-level declarations of each package.
func groupPackages(files []*fileCtx, isStageDir bool) []*pkgCtx {
	var pkgs []*pkgCtx
	byName := map[string]*pkgCtx{}
	for _, fc := range files {
		name := fc.file.Name.Name
		pkg := byName[name]
		if pkg == nil {
			pkg = &pkgCtx{
				isStage: isStageDir && name == "stage",
				scope:   map[string]*ast.Ident{},
				decls:   map[*ast.Ident]*fileCtx{},
			}
			byName[name] = pkg
			pkgs = append(pkgs, pkg)
		}
		fc.pkg = pkg
		pkg.files = append(pkg.files, fc)
		fc.stageNames = map[string]bool{}
		for _, imp := range fc.file.Imports {
			if path, err := strconv.Unquote(imp.Path.Value); err != nil || path != stagePath {
				continue
			}
			switch {
			case imp.Name == nil:
				fc.stageNames["stage"] = true
			case imp.Name.Name == ".":
				fc.dot = true
			case imp.Name.Name != "_":
				fc.stageNames[imp.Name.Name] = true
			}
		}
		for _, decl := range fc.file.Decls {
			for _, id := range topLevelNames(decl) {
				if id.Name != "_" {
					pkg.scope[id.Name] = id
					pkg.decls[id] = fc
				}
			}
		}
	}
	return pkgs
}

// topLevelNames returns the identifiers a top-level declaration declares.
func topLevelNames(decl ast.Decl) []*ast.Ident {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil {
			return []*ast.Ident{d.Name}
		}
	case *ast.GenDecl:
		var ids []*ast.Ident
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				ids = append(ids, s.Name)
			case *ast.ValueSpec:
				ids = append(ids, s.Names...)
			}
		}
		return ids
	}
	return nil
}

// binding is what an identifier refers to.
type binding struct {
	decl any      // the declaring node: *ast.TypeSpec, *ast.ValueSpec, *ast.FuncDecl, …
	file *fileCtx // the file that declares it
	top  bool     // declared at package level
}

// lookup resolves id in its file: first through go/parser's per-file scopes
// (function-local and same-file declarations; ast.Object is deprecated in
// favour of go/types, but ScanSites must work on source that it cannot
// type-check, and the parser still resolves), then through the package's
// top-level declarations in other files. ok is false for a name declared
// nowhere in the package: a dot-imported or predeclared name.
func (c *fileCtx) lookup(id *ast.Ident) (b binding, ok bool) {
	top := c.pkg.scope[id.Name]
	if obj := id.Obj; obj != nil {
		return binding{decl: obj.Decl, file: c, top: top != nil && top.Obj == obj}, true
	}
	if top == nil {
		return binding{}, false
	}
	var decl any
	if top.Obj != nil {
		decl = top.Obj.Decl
	}
	return binding{decl: decl, file: c.pkg.decls[top], top: true}, true
}

// isStageQualifier reports whether x names the stage import in this file.
func (c *fileCtx) isStageQualifier(x ast.Expr) bool {
	id, ok := x.(*ast.Ident)
	return ok && id.Obj == nil && c.stageNames[id.Name] && c.pkg.scope[id.Name] == nil
}

// isAsset reports whether the type expression e denotes stage.Asset.
func (c *fileCtx) isAsset(e ast.Expr, depth int) bool {
	if depth > maxTypeDepth {
		return false
	}
	switch t := ast.Unparen(e).(type) {
	case *ast.SelectorExpr:
		return t.Sel.Name == "Asset" && c.isStageQualifier(t.X)
	case *ast.Ident:
		b, ok := c.lookup(t)
		if !ok {
			return t.Name == "Asset" && (c.dot || c.pkg.isStage)
		}
		spec, isType := b.decl.(*ast.TypeSpec)
		switch {
		case !isType:
			return false
		case b.top && b.file.pkg.isStage && spec.Name.Name == "Asset":
			return true
		case spec.Assign.IsValid() && spec.TypeParams == nil:
			return b.file.isAsset(spec.Type, depth+1)
		}
	}
	return false
}

// underlying follows type names declared in the package (aliases and defined
// types) to the array, slice or map type literal that lets a composite
// literal elide its elements' type. It returns nil for anything else.
func (c *fileCtx) underlying(e ast.Expr, depth int) (ast.Expr, *fileCtx) {
	if depth > maxTypeDepth {
		return nil, nil
	}
	switch t := ast.Unparen(e).(type) {
	case *ast.ArrayType, *ast.MapType:
		return t, c
	case *ast.Ident:
		if b, ok := c.lookup(t); ok {
			if spec, isType := b.decl.(*ast.TypeSpec); isType && spec.TypeParams == nil {
				return b.file.underlying(spec.Type, depth+1)
			}
		}
	}
	return nil, nil
}

// typeRef is a type expression with the file it is written in.
type typeRef struct {
	expr ast.Expr
	file *fileCtx
}

// scan returns the stage.Asset literals of one file.
func (c *fileCtx) scan(fset *token.FileSet) []found {
	var sites []found
	elided := map[*ast.CompositeLit]typeRef{}
	ast.Inspect(c.file, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		typ, ok := typeRef{lit.Type, c}, lit.Type != nil
		if !ok {
			if typ, ok = elided[lit]; !ok {
				return true
			}
		}
		if typ.file.isAsset(typ.expr, 0) {
			pos := fset.Position(lit.Pos())
			site := c.site(fset, lit)
			site.Line = pos.Line
			sites = append(sites, found{Site: site, offset: pos.Offset})
			return true
		}
		under, file := typ.file.underlying(typ.expr, 0)
		var key, elem ast.Expr
		switch u := under.(type) {
		case *ast.ArrayType:
			elem = u.Elt
		case *ast.MapType:
			key, elem = u.Key, u.Value
		}
		for _, elt := range lit.Elts {
			if kv, ok := elt.(*ast.KeyValueExpr); ok {
				elide(elided, kv.Key, key, file)
				elt = kv.Value
			}
			elide(elided, elt, elem, file)
		}
		return true
	})
	return sites
}

// elide records the type of e when e is a composite literal whose type is
// elided; typ is the element (or key) type of the enclosing literal.
func elide(elided map[*ast.CompositeLit]typeRef, e, typ ast.Expr, file *fileCtx) {
	lit, ok := e.(*ast.CompositeLit)
	if !ok || lit.Type != nil || typ == nil {
		return
	}
	typ = ast.Unparen(typ)
	if ptr, ok := typ.(*ast.StarExpr); ok { // []*T{{…}} elides &T
		typ = ptr.X
	}
	elided[lit] = typeRef{typ, file}
}

// site reads Name and Links from a stage.Asset literal.
func (c *fileCtx) site(fset *token.FileSet, lit *ast.CompositeLit) Site {
	site := Site{File: c.rel, Name: `""`, Links: "SkipLinks"}
	for i, elt := range lit.Elts {
		field, value := "", elt
		if kv, ok := elt.(*ast.KeyValueExpr); ok {
			if id, ok := kv.Key.(*ast.Ident); ok {
				field = id.Name
			}
			value = kv.Value
		} else {
			field = [...]string{"Name", "Source", "Links", "Exclude", ""}[min(i, 4)]
		}
		switch field {
		case "Name":
			site.Name = c.text(fset, value)
		case "Links":
			site.Links = c.links(fset, value)
		}
	}
	return site
}

// links normalizes a Links expression.
func (c *fileCtx) links(fset *token.FileSet, e ast.Expr) string {
	switch t := ast.Unparen(e).(type) {
	case *ast.SelectorExpr:
		if isPolicy(t.Sel.Name) && c.isStageQualifier(t.X) {
			return t.Sel.Name
		}
	case *ast.Ident:
		if !isPolicy(t.Name) {
			break
		}
		b, ok := c.lookup(t)
		switch {
		case !ok && (c.dot || c.pkg.isStage):
			return t.Name
		case ok && b.top && b.file.pkg.isStage:
			if spec, isValue := b.decl.(*ast.ValueSpec); isValue && spec != nil {
				return t.Name
			}
		}
		if ok {
			// Declared here, not in package stage: keep it distinguishable.
			return c.file.Name.Name + "." + t.Name
		}
	}
	return c.text(fset, e)
}

// text returns the source text of e.
func (c *fileCtx) text(fset *token.FileSet, e ast.Expr) string {
	tf := fset.File(e.Pos())
	return string(c.src[tf.Offset(e.Pos()):tf.Offset(e.End())])
}
