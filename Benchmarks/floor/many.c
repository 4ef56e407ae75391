// The floor for scenario (a): a bare libcurl multi program that fetches COUNT files with WIDTH in
// flight, reusing WIDTH easy handles, and writes each response straight to its own file (opened at
// its first bytes, closed when it ends). No journal, no sync, no rename, no events: what any client
// built on libcurl's multi interface costs at least on this machine. It prints nothing; run.sh times it.
//
//   cc -O2 many.c -lcurl -o many && ./many BASE COUNT WIDTH OUTDIR   (COUNT files BASE/f<i % 1000>.bin)
#include <stdlib.h>

#include "slots.h"

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: many BASE COUNT WIDTH OUTDIR\n"); return 2; }
    base_url = argv[1];
    int count = atoi(argv[2]), width = atoi(argv[3]);
    outdir = argv[4];
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    struct slot *slots = calloc((size_t)width, sizeof *slots);
    int next = 0, done = 0;
    for (int i = 0; i < width && next < count; i++) {
        make_easy(&slots[i]);
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
            if (message->data.result != CURLE_OK || finish_body(slot) != 0) {
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
