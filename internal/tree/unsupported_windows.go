//go:build windows

// airlock supports Linux and macOS only. Windows is not supported: the
// no-follow guarantees (a link planted in a tree is never followed, a file is
// read only through a descriptor opened beneath its root) need O_NOFOLLOW and
// openat semantics that Windows does not offer. This file makes a Windows
// build fail on purpose, with the policy in the error, rather than leave a
// build that compiles and quietly weakens those guarantees.

package tree

// Names a type that does not exist, so the compiler reports
// "undefined: airlock_supports_only_linux_and_macos" (a type declaration is
// checked first, so this comes before any other error).
type _ airlock_supports_only_linux_and_macos
