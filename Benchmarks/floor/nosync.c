/* LD_PRELOAD shim for (h): syncs that return at once (fsync, fdatasync, syncfs, and syncfs through
 * syscall(2), which Haul calls). `haul -i` run under it shows what durability costs on the disk:
 * curl and the bare program never sync, so the kernel writes their files back after they exit. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <sys/syscall.h>

int fsync(int fd) { (void)fd; return 0; }
int fdatasync(int fd) { (void)fd; return 0; }
int syncfs(int fd) { (void)fd; return 0; }

long syscall(long number, ...) {
    static long (*real)(long, ...);
    if (!real) real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    va_list ap;
    va_start(ap, number);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
    long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
    if (number == SYS_syncfs) return 0;
    return real(number, a, b, c, d, e, f);
}
