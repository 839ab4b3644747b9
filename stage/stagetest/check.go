package stagetest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The suites assert with plain testing, so that an adapter's module that
// runs them pulls in no test library. must* stop the test (a precondition),
// expect* record a failed outcome and go on.

// mustNoError stops the test when err is not nil.
func mustNoError(t testing.TB, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

// must stops the test when ok is false.
func must(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, args...)
	}
}

// expect records a failure when ok is false.
func expect(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
}

// expectNoError records a failure when err is not nil.
func expectNoError(t testing.TB, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

// expectEqual records a failure when got is not want (reflect.DeepEqual).
func expectEqual[T any](t testing.TB, want, got T, format string, args ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s:\n\twant %#v\n\tgot  %#v", fmt.Sprintf(format, args...), want, got)
	}
}

// expectTree records a failure, listing every path that differs, when the
// tree got is not want.
func expectTree(t testing.TB, want, got map[string]node, format string, args ...any) {
	t.Helper()
	if d := diffTrees(want, got); d != "" {
		t.Errorf("%s; differences (want | got):\n%s", fmt.Sprintf(format, args...), d)
	}
}

// diffTrees describes how got differs from want, one path a line, or
// returns "" when they are equal.
func diffTrees(want, got map[string]node) string {
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var sb strings.Builder
	for _, p := range paths {
		w, inWant := want[p]
		g, inGot := got[p]
		switch {
		case !inGot:
			fmt.Fprintf(&sb, "\t%q: %v %.40q | missing\n", p, w.Mode, w.Data)
		case !inWant:
			fmt.Fprintf(&sb, "\t%q: absent | %v %.40q\n", p, g.Mode, g.Data)
		case w != g:
			fmt.Fprintf(&sb, "\t%q: %v %.40q | %v %.40q\n", p, w.Mode, w.Data, g.Mode, g.Data)
		}
	}
	return sb.String()
}
