// The floor for scenario (c): a bare libcurl multi program with COUNT transfers live at once, each
// writing what it receives straight to its own file. It reports its RSS before the transfers and once
// every transfer has received its first bytes (one JSON line), then stops.
//
// Each write opens the file and closes it again: a descriptor per transfer for its file as well as
// its socket would need twice COUNT descriptors, more than a hard open-files limit of 20,000 allows
// for 10,000 transfers (Haul keeps at most a quarter of the limit open; see DescriptorBudget). An
// open descriptor costs kernel memory, not RSS, so this does not move the floor.
//
//   cc -O2 multi.c -lcurl -o multi && ./multi BASE COUNT OUTDIR
#include <curl/curl.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct transfer { const char *path; int started; };
static int started_count = 0;

static size_t on_data(char *data, size_t size, size_t count, void *context) {
    struct transfer *t = context;
    if (!t->started) { t->started = 1; started_count++; }
    int fd = open(t->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return 0;
    size_t written = (size_t)write(fd, data, size * count);
    close(fd);
    return written == size * count ? written : 0;
}

static long rss_kb(void) {
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (status && fgets(line, sizeof line, status)) {
        if (strncmp(line, "VmRSS:", 6) == 0) { kb = atol(line + 6); break; }
    }
    if (status) fclose(status);
    return kb;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: multi BASE COUNT OUTDIR\n"); return 2; }
    struct rlimit limit;
    getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    int count = atoi(argv[2]);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)count);
    long before = rss_kb();
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    struct transfer *transfers = calloc((size_t)count, sizeof *transfers);
    char url[1024], path[1024];
    for (int i = 0; i < count; i++) {
        snprintf(url, sizeof url, "%s/f%d.bin?%d", argv[1], i % 1000, i);
        snprintf(path, sizeof path, "%s/%d.bin", argv[3], i);
        transfers[i].path = strdup(path);
        CURL *easy = curl_easy_init();
        curl_easy_setopt(easy, CURLOPT_URL, url);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, &transfers[i]);
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_multi_add_handle(multi, easy);
    }
    int running = 1;
    while (running && started_count < count) {
        curl_multi_perform(multi, &running);
        curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
    long live = rss_kb();
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("{\"scenario\":\"live\",\"client\":\"libcurl-multi\",\"transfers\":%d,\"started\":%d,\"rssBeforeKB\":%ld,"
           "\"rssLiveKB\":%ld,\"bytesPerTransfer\":%ld,\"wallSeconds\":%.3f}\n",
           count, started_count, before, live, (live - before) * 1024 / count,
           (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9);
    return 0;
}
