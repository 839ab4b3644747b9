// Package gitexec runs the host's real git for airlock, isolated from the
// user's configuration and environment.
//
// Every command runs with hooks off (core.hooksPath=/dev/null), system and
// global configuration ignored (GIT_CONFIG_NOSYSTEM=1,
// GIT_CONFIG_GLOBAL=/dev/null), no terminal prompt (GIT_TERMINAL_PROMPT=0),
// no pager, the C locale, and every GIT_* variable of the host process
// removed, so that a GIT_DIR, GIT_INDEX_FILE or GIT_WORK_TREE the caller
// happens to have set can never redirect a command. Repository discovery
// stops at the given directory (GIT_CEILING_DIRECTORIES is its parent).
// Variables the caller passes explicitly (Cmd.Env) are the only GIT_*
// variables a command sees.
//
// This package is the one place of airlock that reads the process
// environment: a child process needs PATH, HOME and the like, and the scrub
// has to see the GIT_* names to drop them.
//
// Non-guarantees: the repository's own configuration (.git/config) is
// honoured, as git itself would; options that matter to airlock are
// overridden per command with -c by the caller. A command with
// Cmd.UserConfig reads the system and global configuration too: the
// checkout conversions must be the user's own.
package gitexec
