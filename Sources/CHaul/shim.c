// Most of CHaul's shims are `static inline` in include/CHaul.h; what keeps state for the whole process
// is here.
#include "CHaul.h"
#include <errno.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/epoll.h>
#include <linux/fs.h>
#include <sys/ioctl.h>

// The SHA-256 implementation, fetched from libcrypto's provider once. OpenSSL 3 fetches the one
// EVP_sha256() names again at every EVP_Digest: 344 ns for a 70-byte text against 157 ns with a
// fetched one (measured on the machine this was written on).
static EVP_MD *CHaul_sha256_fetched;
static pthread_once_t CHaul_sha256_once = PTHREAD_ONCE_INIT;

static void CHaul_fetch_sha256(void) {
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
    CHaul_sha256_fetched = EVP_MD_fetch(NULL, "SHA256", NULL);
#endif
}

int CHaul_sha256(const void *data, size_t length, unsigned char *digest) {
    pthread_once(&CHaul_sha256_once, CHaul_fetch_sha256);
    const EVP_MD *md = CHaul_sha256_fetched != NULL ? CHaul_sha256_fetched : EVP_sha256();
    unsigned int written = 0;
    return EVP_Digest(data, length, digest, &written, md, NULL) == 1 && written == 32;
}

// Whether linking a nameless file by its descriptor was refused for want of a privilege (then the
// /proc way is taken at once). Through /proc, the kernel resolves /proc/self/fd/N first: 7.7 µs of a
// disk lane's time per file of 10,000 small downloads to tmpfs, measured with perf, where the
// descriptor's own link costs a lookup of the new name only. (Linux 6.10 lets the opener of a file
// link it without the privilege; Debian 12's 6.1 does not.)
static int CHaul_link_directly_refused;

int CHaul_link_nameless(int descriptor, const char *path) {
    return CHaul_link_nameless_remembering(descriptor, path, CHaul_link_nameless_directly, &CHaul_link_directly_refused);
}

int CHaul_link_nameless_remembering(int descriptor, const char *path, int (*directly)(int, const char *), int *refused) {
    if (!__atomic_load_n(refused, __ATOMIC_RELAXED)) {
        if (directly(descriptor, path) == 0) return 0;
        // Without the privilege the kernel answers ENOENT (EPERM in some versions); anything else
        // (the name exists, the disk is full) is the answer. A missing folder is ENOENT too: /proc
        // then fails the same way, and nothing is remembered.
        if (errno != ENOENT && errno != EPERM) return -1;
    }
    int linked = CHaul_link_nameless_through_proc(descriptor, path);
    if (linked == 0) __atomic_store_n(refused, 1, __ATOMIC_RELAXED);
    return linked;
}

long long CHaul_copy_file(int from, int to, long long length) {
    if (length <= 0) return 0;
    // A whole-file clone shares extents: no byte moves, and a later write to either is its own.
    if (ioctl(to, FICLONE, from) == 0) return length;
    long long copied = 0;
    int inKernel = 1;
    char buffer[65536];
    while (copied < length) {
        ssize_t count;
        if (inKernel) {
            count = syscall(SYS_copy_file_range, from, NULL, to, NULL, (size_t)(length - copied), 0u);
            if (count < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)
                && copied == 0) {
                inKernel = 0;
                continue;
            }
        } else {
            size_t want = (size_t)(length - copied) < sizeof buffer ? (size_t)(length - copied) : sizeof buffer;
            count = pread(from, buffer, want, (off_t)copied);
            if (count > 0) {
                ssize_t done = 0;
                while (done < count) {
                    ssize_t written = pwrite(to, buffer + done, (size_t)(count - done), (off_t)(copied + done));
                    if (written < 0 && errno == EINTR) continue;
                    if (written <= 0) return -1;
                    done += written;
                }
            }
        }
        if (count < 0 && errno == EINTR) continue;
        if (count < 0) return -1;
        if (count == 0) break;  // the file got shorter meanwhile
        copied += count;
    }
    return copied;
}

int CHaul_random_bytes(void *buffer, size_t length) {
    ssize_t filled;
    do {
        filled = getrandom(buffer, length, 0);
    } while (filled < 0 && errno == EINTR);
    return filled == (ssize_t)length ? 0 : -1;
}

int CHaul_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int CHaul_epoll_watch_once(int epoll, int fd) {
    struct epoll_event event = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.fd = fd};
    if (epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0) return 0;
    if (errno != EEXIST) return -1;
    return epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &event);
}

int CHaul_epoll_forget(int epoll, int fd) { return epoll_ctl(epoll, EPOLL_CTL_DEL, fd, NULL); }

int CHaul_epoll_ready(int epoll, int *fds, int capacity) {
    struct epoll_event events[64];
    if (capacity > 64) capacity = 64;
    int count = epoll_wait(epoll, events, capacity, -1);
    for (int index = 0; index < count; index++) fds[index] = events[index].data.fd;
    return count;
}

// glibc's, declared under _GNU_SOURCE only (CHaul.h's headers come first).
extern int pipe2(int ends[2], int flags);

int CHaul_pipe(int ends[2]) {
    if (pipe2(ends, O_CLOEXEC) != 0) return -1;
    int flags = fcntl(ends[0], F_GETFL);
    if (flags < 0 || fcntl(ends[0], F_SETFL, flags | O_NONBLOCK) != 0) {
        int saved = errno;
        close(ends[0]);
        close(ends[1]);
        errno = saved;
        return -1;
    }
    return 0;
}
