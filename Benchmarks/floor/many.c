// The floor for scenario (a): a bare libcurl multi program that fetches COUNT files with WIDTH in
// flight, reusing WIDTH easy handles, and writes each response straight to its own file (opened at
// its first bytes, closed when it ends). No journal, no sync, no rename, no events: what any client
// built on libcurl's multi interface costs at least on this machine. It prints nothing; run.sh times it.
//
//   cc -O2 many.c -lcurl -o many && ./many BASE COUNT WIDTH OUTDIR   (COUNT files BASE/f<i % 1000>.bin)
#include <curl/curl.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct slot { CURL *easy; int fd; int index; };
static const char *base, *outdir;

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

static void start(CURLM *multi, struct slot *slot, int index) {
    char url[1024];
    snprintf(url, sizeof url, "%s/f%d.bin", base, index % 1000);
    slot->index = index;
    slot->fd = -1;
    curl_easy_setopt(slot->easy, CURLOPT_URL, url);
    curl_multi_add_handle(multi, slot->easy);
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: many BASE COUNT WIDTH OUTDIR\n"); return 2; }
    base = argv[1];
    int count = atoi(argv[2]), width = atoi(argv[3]);
    outdir = argv[4];
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    struct slot *slots = calloc((size_t)width, sizeof *slots);
    int next = 0, done = 0;
    for (int i = 0; i < width && next < count; i++) {
        slots[i].easy = curl_easy_init();
        curl_easy_setopt(slots[i].easy, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(slots[i].easy, CURLOPT_WRITEDATA, &slots[i]);
        curl_easy_setopt(slots[i].easy, CURLOPT_PRIVATE, &slots[i]);
        curl_easy_setopt(slots[i].easy, CURLOPT_FAILONERROR, 1L);
        curl_easy_setopt(slots[i].easy, CURLOPT_NOSIGNAL, 1L);
        start(multi, &slots[i], next++);
    }
    while (done < count) {
        int running, queued;
        curl_multi_perform(multi, &running);
        CURLMsg *message;
        while ((message = curl_multi_info_read(multi, &queued))) {
            if (message->msg != CURLMSG_DONE) continue;
            struct slot *slot;
            curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&slot);
            if (message->data.result != CURLE_OK || slot->fd < 0 || close(slot->fd) != 0) {
                fprintf(stderr, "many: file %d failed: %s\n", slot->index, curl_easy_strerror(message->data.result));
                return 1;
            }
            done++;
            curl_multi_remove_handle(multi, slot->easy);
            if (next < count) start(multi, slot, next++);
        }
        if (done < count) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    return 0;
}
