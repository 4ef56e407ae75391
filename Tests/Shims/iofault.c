/* LD_PRELOAD shim for the fault-injection tests (`DiskFaultTests`): fails the N-th call that writes
 * under a folder, with ENOSPC or EIO, as SQLite's test suite fails its N-th I/O call. Counted calls:
 * write, pwrite(64), writev, pwritev, fallocate (the function and the system call), fsync,
 * fdatasync, syncfs (both), rename, renameat, renameat2 (both), link, linkat, fsetxattr: every
 * call Haul or SQLite makes to write a file, make it durable, give it a name or record its origin.
 *
 * Environment:
 *   HAUL_FAULT_UNDER    only calls on files under this folder count (others pass untouched)
 *   HAUL_FAULT_AT       the call (1-based) that fails; 0 or unset: none fails (a counting run)
 *   HAUL_FAULT_PERSIST  1: every counted call from the N-th on fails too (a disk that stays full)
 *   HAUL_FAULT_ERRNO    ENOSPC (default) or EIO
 *   HAUL_FAULT_COUNT    a file the number of counted calls is written to at exit
 *   HAUL_FAULT_LOG      a file each failed call is appended to ("N name path")
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

static long counted;
static const char *under;
static size_t under_length;
static long fail_at;
static int persist;
static int fault_errno = ENOSPC;

__attribute__((constructor)) static void setup(void) {
    under = getenv("HAUL_FAULT_UNDER");
    under_length = under ? strlen(under) : 0;
    const char *at = getenv("HAUL_FAULT_AT");
    fail_at = at ? atol(at) : 0;
    const char *p = getenv("HAUL_FAULT_PERSIST");
    persist = p && *p == '1';
    const char *e = getenv("HAUL_FAULT_ERRNO");
    if (e && strcmp(e, "EIO") == 0) fault_errno = EIO;
}

static void *real(const char *name) { return dlsym(RTLD_NEXT, name); }

static int path_is_under(const char *path) {
    return under_length > 0 && path && strncmp(path, under, under_length) == 0 &&
           (path[under_length] == '/' || path[under_length] == '\0');
}

static int fd_path(int fd, char *out, size_t size) {
    char link[64];
    if (fd == AT_FDCWD) return getcwd(out, size) ? 0 : -1;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, size - 1);
    if (n < 0) return -1;
    out[n] = '\0';
    return 0;
}

static int fd_is_under(int fd) {
    char path[PATH_MAX];
    return fd >= 0 && fd_path(fd, path, sizeof path) == 0 && path_is_under(path);
}

static int at_is_under(int dirfd, const char *path) {
    if (!path) return 0;
    if (path[0] == '/') return path_is_under(path);
    if (path[0] == '\0') return fd_is_under(dirfd);  /* AT_EMPTY_PATH */
    char folder[PATH_MAX];
    if (fd_path(dirfd, folder, sizeof folder) != 0) return 0;
    size_t length = strlen(folder);
    if (length + 1 + strlen(path) >= sizeof folder) return 0;
    folder[length] = '/';
    strcpy(folder + length + 1, path);
    return path_is_under(folder);
}

static void note(long call, const char *name, const char *what) {
    const char *log = getenv("HAUL_FAULT_LOG");
    if (!log) return;
    int (*real_open)(const char *, int, ...) = real("open");
    ssize_t (*real_write)(int, const void *, size_t) = real("write");
    int fd = real_open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;
    char line[PATH_MAX + 64];
    int n = snprintf(line, sizeof line, "%ld %s %s\n", call, name, what ? what : "");
    if (n > 0) real_write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    close(fd);
}

/* Whether this counted call fails (errno set). */
static int fails(int counts, const char *name, const char *what) {
    if (!counts) return 0;
    long call = __atomic_add_fetch(&counted, 1, __ATOMIC_SEQ_CST);
    if (fail_at <= 0 || call < fail_at || (call > fail_at && !persist)) return 0;
    note(call, name, what);
    errno = fault_errno;
    return 1;
}

__attribute__((destructor)) static void report(void) {
    const char *file = getenv("HAUL_FAULT_COUNT");
    if (!file) return;
    FILE *out = fopen(file, "w");
    if (!out) return;
    fprintf(out, "%ld\n", __atomic_load_n(&counted, __ATOMIC_SEQ_CST));
    fclose(out);
}

/* A counted call on a descriptor, its file named in the log. */
static int fd_fails(int fd, const char *name) {
    char path[PATH_MAX];
    if (fd < 0 || fd_path(fd, path, sizeof path) != 0 || !path_is_under(path)) return 0;
    return fails(1, name, path);
}

#define FD_CALL(name) fd_fails(fd, name)

ssize_t write(int fd, const void *buffer, size_t count) {
    static ssize_t (*next)(int, const void *, size_t);
    if (!next) next = real("write");
    if (fd > 2 && FD_CALL("write")) return -1;
    return next(fd, buffer, count);
}

ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    static ssize_t (*next)(int, const void *, size_t, off_t);
    if (!next) next = real("pwrite");
    if (FD_CALL("pwrite")) return -1;
    return next(fd, buffer, count, offset);
}

ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    static ssize_t (*next)(int, const void *, size_t, off_t);
    if (!next) next = real("pwrite64");
    if (FD_CALL("pwrite64")) return -1;
    return next(fd, buffer, count, offset);
}

ssize_t writev(int fd, const struct iovec *vector, int count) {
    static ssize_t (*next)(int, const struct iovec *, int);
    if (!next) next = real("writev");
    if (fd > 2 && FD_CALL("writev")) return -1;
    return next(fd, vector, count);
}

ssize_t pwritev(int fd, const struct iovec *vector, int count, off_t offset) {
    static ssize_t (*next)(int, const struct iovec *, int, off_t);
    if (!next) next = real("pwritev");
    if (FD_CALL("pwritev")) return -1;
    return next(fd, vector, count, offset);
}

int fallocate(int fd, int mode, off_t offset, off_t length) {
    static int (*next)(int, int, off_t, off_t);
    if (!next) next = real("fallocate");
    if (FD_CALL("fallocate")) return -1;
    return next(fd, mode, offset, length);
}

int posix_fallocate(int fd, off_t offset, off_t length) {
    static int (*next)(int, off_t, off_t);
    if (!next) next = real("posix_fallocate");
    if (FD_CALL("posix_fallocate")) return errno;
    return next(fd, offset, length);
}

int fsync(int fd) {
    static int (*next)(int);
    if (!next) next = real("fsync");
    if (FD_CALL("fsync")) return -1;
    return next(fd);
}

int fdatasync(int fd) {
    static int (*next)(int);
    if (!next) next = real("fdatasync");
    if (FD_CALL("fdatasync")) return -1;
    return next(fd);
}

int syncfs(int fd) {
    static int (*next)(int);
    if (!next) next = real("syncfs");
    if (FD_CALL("syncfs")) return -1;
    return next(fd);
}

int rename(const char *from, const char *to) {
    static int (*next)(const char *, const char *);
    if (!next) next = real("rename");
    if (fails(at_is_under(AT_FDCWD, from) || at_is_under(AT_FDCWD, to), "rename", to)) return -1;
    return next(from, to);
}

int renameat(int fromfd, const char *from, int tofd, const char *to) {
    static int (*next)(int, const char *, int, const char *);
    if (!next) next = real("renameat");
    if (fails(at_is_under(fromfd, from) || at_is_under(tofd, to), "renameat", to)) return -1;
    return next(fromfd, from, tofd, to);
}

int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned int flags) {
    static int (*next)(int, const char *, int, const char *, unsigned int);
    if (!next) next = real("renameat2");
    if (fails(at_is_under(fromfd, from) || at_is_under(tofd, to), "renameat2", to)) return -1;
    return next(fromfd, from, tofd, to, flags);
}

int link(const char *from, const char *to) {
    static int (*next)(const char *, const char *);
    if (!next) next = real("link");
    if (fails(at_is_under(AT_FDCWD, to), "link", to)) return -1;
    return next(from, to);
}

int linkat(int fromfd, const char *from, int tofd, const char *to, int flags) {
    static int (*next)(int, const char *, int, const char *, int);
    if (!next) next = real("linkat");
    if (fails(at_is_under(tofd, to), "linkat", to)) return -1;
    return next(fromfd, from, tofd, to, flags);
}

/* The origin a placed file records (`FileOrigin`, extended attributes): best effort, never the
 * file's fate. */
int fsetxattr(int fd, const char *name, const void *value, size_t size, int flags) {
    static int (*next)(int, const char *, const void *, size_t, int);
    if (!next) next = real("fsetxattr");
    if (FD_CALL("fsetxattr")) return -1;
    return next(fd, name, value, size, flags);
}

/* Haul's C shims reach fallocate, syncfs and renameat2 through syscall(2). */
long syscall(long number, ...) {
    static long (*next)(long, ...);
    if (!next) next = (long (*)(long, ...))real("syscall");
    va_list ap;
    va_start(ap, number);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
    long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
    int counts = 0;
    const char *name = NULL;
    switch (number) {
    case SYS_fallocate: counts = fd_is_under((int)a); name = "fallocate(2)"; break;
    case SYS_syncfs: counts = fd_is_under((int)a); name = "syncfs(2)"; break;
    case SYS_renameat2:
        counts = at_is_under((int)a, (const char *)b) || at_is_under((int)c, (const char *)d);
        name = "renameat2(2)";
        break;
    default: break;
    }
    if (fails(counts, name, number == SYS_renameat2 ? (const char *)d : NULL)) return -1;
    return next(number, a, b, c, d, e, f);
}
