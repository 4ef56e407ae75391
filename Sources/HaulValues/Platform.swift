// Haul runs on Linux only (Package.swift says so): it is built on glibc, /proc, O_TMPFILE,
// renameat2, syncfs and libevent's epoll backend. Elsewhere the build stops here, saying so, rather
// than at the first missing symbol.
#if !os(Linux)
    #error("Haul supports Linux only (glibc, /proc, O_TMPFILE, renameat2, epoll).")
#endif
