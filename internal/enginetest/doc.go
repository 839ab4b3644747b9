// Package enginetest is the test harness for the real exec engines that
// sandbox.Exec drives: Docker (and Podman, where it is installed) and
// bubblewrap. Tests in any package use it to get an engine's argv prefix,
// for example
//
//	c := enginetest.StartContainer(t, enginetest.Docker)
//	r := sandbox.Exec(c.Argv()...) // docker exec -i <id>
//
// and to break the engine under a running command (Container.Kill, then
// Container.Start). For bubblewrap, Bwrap (and BwrapArgs with a
// BwrapConfig) gives the argv of an isolated sandbox with one writable
// work directory:
//
//	r := sandbox.Exec(enginetest.Bwrap(t, work)...) // bwrap <flags> --
//
// Every helper skips its test, with a message naming what is missing, when
// the engine is absent: the docker command, a daemon that answers `docker
// info`, bwrap, or a kernel that lets bwrap make its namespaces. Nothing is
// pulled from a registry: the container image is assembled offline from
// this machine's files (a static busybox for sh, coreutils and tar; the
// host's git with the shared libraries ldd names) and imported with
// `docker import`, once per content: its tag holds the SHA-256 of the
// image's tar stream, so a second test binary reuses it, and concurrent
// binaries serialize on a lock file while one of them imports.
//
// Containers run with no network, as a non-root user (uid 1000) in /work,
// under docker's init so that orphans are reaped; each is removed on
// t.Cleanup, and containers left by a test binary that died are removed by
// the next one.
package enginetest
