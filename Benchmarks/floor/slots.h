// What the two floors of scenario (a) share (many.c and events.c): one slot per easy handle, reused
// file after file; each response written straight to its own file, opened at its first bytes.
#include <curl/curl.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

struct slot { CURL *easy; int fd; int index; };
static const char *base_url, *outdir;

static size_t on_data(char *data, size_t size, size_t count, void *context) {
    struct slot *slot = context;
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

/// Starts file `index` (BASE/f<index % 1000>.bin) on `slot`.
static void start(CURLM *multi, struct slot *slot, int index) {
    char url[1024];
    snprintf(url, sizeof url, "%s/f%d.bin", base_url, index % 1000);
    slot->index = index;
    slot->fd = -1;
    curl_easy_setopt(slot->easy, CURLOPT_URL, url);
    curl_multi_add_handle(multi, slot->easy);
}
