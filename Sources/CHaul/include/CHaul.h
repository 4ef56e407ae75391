// The one C module of Haul: every C header (libcurl, libevent, SQLite, OpenSSL's digests) comes in through here, so that
// Swift sees one definition of shared system types such as `fd_set`.
//
// libcurl's setopt/getinfo functions are variadic and cannot be called from Swift; the typed
// `static inline` wrappers below pass each argument with the C type curl reads (`long`,
// `curl_off_t`, pointers, callbacks).
#ifndef CHAUL_H
#define CHAUL_H

#include <curl/curl.h>
#include <event2/event.h>
#include <sys/eventfd.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <signal.h>
#include <sqlite3.h>
#include <openssl/evp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/prctl.h>

/// The SHA-256 of the `length` bytes at `data`, into the 32 bytes at `digest`: 1, or 0 where
/// libcrypto has none. Fetches the implementation once per process (see shim.c).
int CHaul_sha256(const void *data, size_t length, unsigned char *digest);
/// Names the calling thread (at most 15 bytes; what gdb, `top -H` and `ps -L` show): 0, or -1.
static inline int CHaul_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}
/// Fills `length` bytes (at most 256) from the kernel's random source: 0, or -1 (errno set).
int CHaul_random_bytes(void *buffer, size_t length);

/// Makes SQLite's Unix VFS allocate the blocks of a WAL index's region before mapping it (once per
/// process; see sqlite_shm.c), so that a full disk is an error and not SIGBUS: 1 when it could, else 0.
int CHaul_sqlite_allocate_shared_memory(void);
/// Creates the empty file `name` in the folder open at `folder` (mode `mode`) not copied on write,
/// where the folder is on btrfs (whose mapped pages otherwise need space at each first write: SIGBUS
/// on a full disk); elsewhere, or when a file is there already, does nothing. 1 when it made such a
/// file, else 0. See sqlite_shm.c.
int CHaul_create_without_copy_on_write(int folder, const char *name, unsigned int mode);

/// A pipe whose two ends are close-on-exec from their creation (no child spawned meanwhile by
/// another thread inherits them), its read end non-blocking: 0, or -1 (errno set).
int CHaul_pipe(int ends[2]);
/// A new epoll set (close-on-exec): its descriptor, or -1.
int CHaul_epoll_create(void);
/// Watches `fd` in `epoll` once for reading or its writers' going (one-shot), added or re-armed: 0, or -1.
int CHaul_epoll_watch_once(int epoll, int fd);
/// Stops watching `fd` in `epoll`: 0, or -1.
int CHaul_epoll_forget(int epoll, int fd);
/// Waits for events of `epoll` and writes the descriptors that have one into `fds` (at most
/// `capacity`, at most 64): how many, or -1 (errno set; EINTR included).
int CHaul_epoll_ready(int epoll, int *fds, int capacity);

/// Copies the first `length` bytes of the file open at `from` into the empty file open at `to`:
/// shared extents where the file system can (`FICLONE`, btrfs and XFS), else in the kernel
/// (`copy_file_range`), else read and written. Returns the bytes copied (`length`), or -1 with
/// `errno` set. See shim.c.
long long CHaul_copy_file(int from, int to, long long length);

typedef size_t (*CHaul_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*CHaul_debug_callback)(CURL *handle, curl_infotype type, char *data, size_t size, void *context);

// MARK: easy handle options

static inline CURLcode CHaul_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode CHaul_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode CHaul_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode CHaul_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode CHaul_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode CHaul_easy_setopt_data_callback(CURL *handle, CURLoption option, CHaul_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode CHaul_easy_setopt_debug_callback(CURL *handle, CHaul_debug_callback value) {
    return curl_easy_setopt(handle, CURLOPT_DEBUGFUNCTION, value);
}

/// curl's header callback for ``CHaul_easy_track_header_end``: a status line starts a response's
/// head (a 1xx, a redirect or a proxy's CONNECT answer came before it), its empty line ends it.
static size_t CHaul_header_end_callback(char *buffer, size_t size, size_t count, void *ended) {
    size_t length = size * count;
    if (length >= 5 && buffer[0] == 'H' && buffer[1] == 'T' && buffer[2] == 'T' && buffer[3] == 'P' && buffer[4] == '/') {
        *(int *)ended = 0;
    } else if ((length == 2 && buffer[0] == '\r' && buffer[1] == '\n') || (length == 1 && buffer[0] == '\n')) {
        *(int *)ended = 1;
    }
    return length;
}

/// libcurl 7.88 takes a connection closed in the middle of a response's head for the end of a
/// response without a body: `curl` itself exits 0 with an empty file. Haul tracks, in `*ended`,
/// whether the last response's head came to its empty line (1) or not (0), and refuses the answer
/// when it did not.
static inline CURLcode CHaul_easy_track_header_end(CURL *handle, int *ended) {
    CURLcode code = curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, CHaul_header_end_callback);
    return code != CURLE_OK ? code : curl_easy_setopt(handle, CURLOPT_HEADERDATA, (void *)ended);
}

/// libcurl 7.88 opens its sockets without close-on-exec: a child process started while a transfer
/// was connected (by the application, from any thread) kept the socket open, so a transfer Haul
/// stopped stayed open to the server for as long as the child lived. Sockets are opened with
/// SOCK_CLOEXEC instead, atomically (an fcntl after the fact would race a fork on another thread).
static curl_socket_t CHaul_open_socket(void *context, curlsocktype purpose, struct curl_sockaddr *address) {
    (void)context;
    (void)purpose;
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

static inline CURLcode CHaul_easy_open_sockets_close_on_exec(CURL *handle) {
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, CHaul_open_socket);
}

/// `CURLOPT_OPENSOCKETFUNCTION` and its data: curl calls `callback(context, purpose, address)` to
/// open each socket (the callback opens it close-on-exec, as ``CHaul_open_socket`` does, and tells
/// the reactor's owner which transfer's connection it is).
static inline CURLcode CHaul_easy_open_sockets_through(CURL *handle, curl_opensocket_callback callback, void *context) {
    CURLcode code = curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, callback);
    return code != CURLE_OK ? code : curl_easy_setopt(handle, CURLOPT_OPENSOCKETDATA, context);
}

/// `CURLOPT_CLOSESOCKETFUNCTION` and its data: curl calls `callback(context, socket)` to close each
/// socket it opened through the open-socket callback (the reactor forgets the socket's watch first).
static inline CURLcode CHaul_easy_close_sockets_through(CURL *handle, curl_closesocket_callback callback, void *context) {
    CURLcode code = curl_easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, callback);
    return code != CURLE_OK ? code : curl_easy_setopt(handle, CURLOPT_CLOSESOCKETDATA, context);
}

// MARK: easy handle information

static inline CURLcode CHaul_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode CHaul_easy_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode CHaul_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

/// The value of the `index`th header `name` of the last response (NULL when there is none), and in
/// `amount` how many headers of that name it has. The string is owned by curl and is overwritten by
/// the next call: copy it at once.
static inline const char *CHaul_easy_header_at(CURL *handle, const char *name, size_t index, size_t *amount) {
    struct curl_header *header = NULL;
    *amount = 0;
    if (curl_easy_header(handle, name, index, CURLH_HEADER, -1, &header) != CURLHE_OK || header == NULL) {
        return NULL;
    }
    *amount = header->amount;
    return header->value;
}

// MARK: multi handle options

// MARK: share handle

static inline CURLSHcode CHaul_share_setopt_long(CURLSH *handle, CURLSHoption option, long value) {
    return curl_share_setopt(handle, option, value);
}

static inline CURLMcode CHaul_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

static inline CURLMcode CHaul_multi_setopt_pointer(CURLM *handle, CURLMoption option, void *value) {
    return curl_multi_setopt(handle, option, value);
}

static inline CURLMcode CHaul_multi_setopt_socket_callback(CURLM *handle, curl_socket_callback value) {
    return curl_multi_setopt(handle, CURLMOPT_SOCKETFUNCTION, value);
}

static inline CURLMcode CHaul_multi_setopt_timer_callback(CURLM *handle, curl_multi_timer_callback value) {
    return curl_multi_setopt(handle, CURLMOPT_TIMERFUNCTION, value);
}

// MARK: multi messages

/// Copies what Haul needs out of a CURLMsg (the message is only valid until the next call).
static inline int CHaul_multi_info_read(CURLM *multi, CURL **easy, CURLcode *result) {
    int queued = 0;
    CURLMsg *message;
    while ((message = curl_multi_info_read(multi, &queued)) != NULL) {
        if (message->msg == CURLMSG_DONE) {
            *easy = message->easy_handle;
            *result = message->data.result;
            return 1;
        }
    }
    return 0;
}

// MARK: libevent

static inline short CHaul_EV_READ(void) { return EV_READ; }
static inline short CHaul_EV_WRITE(void) { return EV_WRITE; }
static inline short CHaul_EV_PERSIST(void) { return EV_PERSIST; }
static inline short CHaul_EV_TIMEOUT(void) { return EV_TIMEOUT; }

// MARK: SQLite

/// Binds a copy of `text` (SQLITE_TRANSIENT, a cast macro Swift cannot import); NULL binds NULL.
static inline int CHaul_sqlite_bind_text(sqlite3_stmt *statement, int index, const char *text) {
    if (text == NULL) { return sqlite3_bind_null(statement, index); }
    return sqlite3_bind_text(statement, index, text, -1, SQLITE_TRANSIENT);
}

/// Tells `database` not to checkpoint its WAL when it closes (sqlite3_db_config is variadic): a
/// connection that only reads leaves the files as it found them. SQLITE_OK when it could.
static inline int CHaul_sqlite_no_checkpoint_on_close(sqlite3 *database) {
    return sqlite3_db_config(database, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}

// MARK: files

/// A nameless file in `directory`, open for reading and writing (`O_TMPFILE`, whose name glibc shows
/// only to _GNU_SOURCE), or -1 with errno (EOPNOTSUPP where the file system has none).
static inline int CHaul_open_nameless(const char *directory) {
#ifdef __O_TMPFILE
    return open(directory, __O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
#else
    errno = EOPNOTSUPP;
    return -1;
#endif
}

/// Allocates the blocks of `length` bytes from `offset` of the file `descriptor` without changing its
/// length (`fallocate` with FALLOC_FL_KEEP_SIZE, which glibc shows only to _GNU_SOURCE): 0, or -1
/// with errno (ENOSPC when the file system has not that much free; EOPNOTSUPP where it cannot).
static inline int CHaul_preallocate(int descriptor, long long offset, long long length) {
#ifdef SYS_fallocate
    return (int)syscall(SYS_fallocate, descriptor, 0x01 /* FALLOC_FL_KEEP_SIZE */, (off_t)offset, (off_t)length);
#else
    errno = EOPNOTSUPP;
    return -1;
#endif
}

/// Writes back and commits everything of the file system `descriptor` is on (`syncfs`, which glibc
/// shows only to _GNU_SOURCE): 0, or -1 with errno (ENOSYS where there is no such call).
static inline int CHaul_syncfs(int descriptor) {
#ifdef SYS_syncfs
    return (int)syscall(SYS_syncfs, descriptor);
#else
    errno = ENOSYS;
    return -1;
#endif
}

/// Whether the file `descriptor` is on a file system in memory (tmpfs, ramfs), where syncing does
/// nothing.
static inline int CHaul_isInMemory(int descriptor) {
    struct statfs status;
    if (fstatfs(descriptor, &status) != 0) return 0;
    return status.f_type == 0x01021994 /* TMPFS_MAGIC */ || status.f_type == (typeof(status.f_type))0x858458f6 /* RAMFS_MAGIC */;
}

/// Names the nameless file `descriptor` `path` (which must not exist): 0, or -1 with errno. Linking
/// the descriptor itself (`AT_EMPTY_PATH`) needs CAP_DAC_READ_SEARCH; without it the link goes
/// through /proc/self/fd, and once that worked where the first was refused, every later call goes
/// there straight (see shim.c).
int CHaul_link_nameless(int descriptor, const char *path);

/// ``CHaul_link_nameless`` with the direct way and the memory of its refusal given (for tests).
int CHaul_link_nameless_remembering(int descriptor, const char *path, int (*directly)(int, const char *), int *refused);

/// The two ways of ``CHaul_link_nameless``, for tests: through the descriptor (`AT_EMPTY_PATH`), or
/// through its /proc/self/fd link.
static inline int CHaul_link_nameless_directly(int descriptor, const char *path) {
    return linkat(descriptor, "", AT_FDCWD, path, 0x1000 /* AT_EMPTY_PATH, shown only to _GNU_SOURCE */);
}
static inline int CHaul_link_nameless_through_proc(int descriptor, const char *path) {
    char source[32];
    snprintf(source, sizeof source, "/proc/self/fd/%d", descriptor);
    return linkat(AT_FDCWD, source, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}

/// Renames `from` to `to` unless something is at `to` (then -1 with EEXIST): `renameat2` with
/// `RENAME_NOREPLACE`, atomic. Where the file system has no such rename (EINVAL; ENOSYS on an old
/// kernel), a hard link and an unlink do the same for a regular file: the link fails if `to` exists.
static inline int CHaul_rename_noreplace(const char *from, const char *to) {
    if (syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, 1 /* RENAME_NOREPLACE */) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1;
    if (link(from, to) != 0) return -1;
    unlink(from);
    return 0;
}

#endif
