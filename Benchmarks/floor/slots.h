// What the two floors of scenario (a) share (many.c and events.c): one slot per easy handle, reused
// file after file; each response written straight to its own file, opened at its first bytes.
// With OUTDIR "-" (scenario (k)), each body is collected in memory instead: a buffer of its own,
// grown as the body arrives and freed when the body is whole, as a caller given each body would.
#include <curl/curl.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct slot { CURL *easy; int fd; int index; char *body; size_t length, capacity; };
static const char *base_url, *outdir;
static long long bytes_in_memory;

static int in_memory(void) { return outdir[0] == '-' && outdir[1] == 0; }

static size_t on_data(char *data, size_t size, size_t count, void *context) {
    struct slot *slot = context;
    if (in_memory()) {
        size_t more = size * count;
        if (slot->length + more > slot->capacity) {
            size_t capacity = slot->capacity ? slot->capacity : 16384;
            while (capacity < slot->length + more) capacity *= 2;
            char *grown = realloc(slot->body, capacity);
            if (!grown) return 0;
            slot->body = grown;
            slot->capacity = capacity;
        }
        memcpy(slot->body + slot->length, data, more);
        slot->length += more;
        return more;
    }
    if (slot->fd < 0) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%d.bin", outdir, slot->index);
        slot->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (slot->fd < 0) return 0;
    }
    ssize_t written = write(slot->fd, data, size * count);
    return written == (ssize_t)(size * count) ? (size_t)written : 0;
}

/// A new easy handle for `slot`, set up once.
static void make_easy(struct slot *slot) {
    slot->easy = curl_easy_init();
    curl_easy_setopt(slot->easy, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(slot->easy, CURLOPT_WRITEDATA, slot);
    curl_easy_setopt(slot->easy, CURLOPT_PRIVATE, slot);
    curl_easy_setopt(slot->easy, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(slot->easy, CURLOPT_NOSIGNAL, 1L);
}

/// The body of `slot` is whole: its file closed, or its buffer handed over (counted, freed).
/// Returns 0 when it went well.
static int finish_body(struct slot *slot) {
    if (in_memory()) {
        if (!slot->body) return -1;
        bytes_in_memory += (long long)slot->length;
        free(slot->body);
        slot->body = NULL;
        slot->length = slot->capacity = 0;
        return 0;
    }
    return slot->fd < 0 || close(slot->fd) != 0 ? -1 : 0;
}

/// Starts file `index` (BASE/f<index % 1000>.bin) on `slot`.
static void start(CURLM *multi, struct slot *slot, int index) {
    char url[1024];
    snprintf(url, sizeof url, "%s/f%d.bin", base_url, index % 1000);
    slot->index = index;
    slot->fd = -1;
    curl_easy_setopt(slot->easy, CURLOPT_URL, url);
    curl_multi_add_handle(multi, slot->easy);
}
