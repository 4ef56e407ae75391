// SQLite's WAL index (a database's `-shm` file, which every connection maps into memory) on a file
// system whose blocks are smaller than a page. SQLite grows that file by writing one byte at the end
// of each 4 KiB page of a new region, which allocates the whole page only where a block is a page;
// where blocks are smaller (ext4 made on a partition under 512 MiB uses 1 KiB blocks) the rest of
// each page stays a hole, and on a full disk SQLite's first store into one killed the process with
// SIGBUS (found with `haul` on a full 1 KiB-block ext4: "Bus error" in `sqlite3WalFrames`).
//
// The `mmap` SQLite's Unix VFS calls (its system-call table, `xSetSystemCall`, made for this) is
// given the blocks of a shared, writable mapping first, on SQLite's own descriptor, within the
// file's length: a full disk is then a failed `mmap` (ENOSPC), which SQLite reports as an I/O error.
// No descriptor of the file is opened or closed here: closing one would drop every POSIX lock the
// process holds on the file, SQLite's included (an earlier try, which opened the `-shm` by name,
// corrupted journals under load that way).
//
// The table is the process's: every connection of the Unix VFS in the process, the application's
// own included, gets the same change, which only turns that SIGBUS into an error.
#define _GNU_SOURCE  // fallocate
#include "CHaul.h"
#include <pthread.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>

typedef void *(*CHaul_mmap_function)(void *, size_t, int, int, int, off_t);
static CHaul_mmap_function CHaul_sqlite_mmap;
static pthread_once_t CHaul_shm_once = PTHREAD_ONCE_INIT;
static int CHaul_shm_installed;

// Whether the file open at `fd` has blocks for all its length (no hole): nothing to allocate. XFS
// answers ENOSPC to a full disk's fallocate even over blocks it has, so a file whose every block is
// there is left alone (SQLite's own way then works, and did).
static int CHaul_is_whole(int fd) {
    struct stat status;
    return fstat(fd, &status) == 0 && (long long)status.st_blocks * 512 >= (long long)status.st_size;
}

static void *CHaul_allocating_mmap(void *address, size_t length, int protection, int flags, int fd, off_t offset) {
    if ((protection & PROT_WRITE) && (flags & MAP_SHARED) && fd >= 0 && !CHaul_is_whole(fd)) {
        int result;
        do {
            result = fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, (off_t)length);
        } while (result != 0 && errno == EINTR);
        if (result != 0 && (errno == ENOSPC || errno == EDQUOT)) return MAP_FAILED;
        // Elsewhere (no fallocate on this file system, or another error) SQLite's own way applies.
    }
    return CHaul_sqlite_mmap(address, length, protection, flags, fd, offset);
}

static void CHaul_install_shm_guard(void) {
    sqlite3_vfs *unix_vfs = sqlite3_vfs_find("unix");
    if (unix_vfs == NULL || unix_vfs->iVersion < 3 || unix_vfs->xGetSystemCall == NULL) return;
    CHaul_sqlite_mmap = (CHaul_mmap_function)unix_vfs->xGetSystemCall(unix_vfs, "mmap");
    if (CHaul_sqlite_mmap == NULL) return;  // built without memory maps: no index is mapped this way
    if (unix_vfs->xSetSystemCall(unix_vfs, "mmap", (sqlite3_syscall_ptr)CHaul_allocating_mmap) == SQLITE_OK) {
        CHaul_shm_installed = 1;
    }
}

int CHaul_sqlite_allocate_shared_memory(void) {
    pthread_once(&CHaul_shm_once, CHaul_install_shm_guard);
    return CHaul_shm_installed;
}

// On btrfs the allocation above is not enough: btrfs reserves space when a mapped page is first
// written (and again after each writeback), and with none left that write is SIGBUS too (a full
// btrfs image: 4 runs of 4 ended so). A file that is not copied on write (FS_NOCOW_FL, which a file
// takes only while empty) writes in place: 6 runs of 6 ended with ENOSPC errors instead.
#define CHaul_btrfs_magic 0x9123683E

int CHaul_create_without_copy_on_write(int folder, const char *name, unsigned int mode) {
    struct statfs system;
    if (fstatfs(folder, &system) != 0 || (unsigned long)system.f_type != CHaul_btrfs_magic) return 0;
    // Made here, empty, or left alone: a file another process has (and may hold locks on) is never
    // opened and closed here.
    int fd = openat(folder, name, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
    if (fd < 0) return 0;
    int flags = 0;
    int done = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0
        && (flags |= FS_NOCOW_FL, ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0);
    close(fd);
    return done;
}
