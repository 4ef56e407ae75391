// The floor of Haul's own design for scenario (a): many.c's work (COUNT files with WIDTH in flight,
// WIDTH easy handles reused, each response written straight to its own file) driven the way Haul
// drives libcurl: one libevent event base and the multi *socket* API (CURLMOPT_SOCKETFUNCTION,
// CURLMOPT_TIMERFUNCTION, curl_multi_socket_action), as in curl's hiperfifo.c example. The
// difference between this program and many.c (curl_multi_perform + curl_multi_poll) is what the
// reactor design itself costs per file, before any of Haul's own work. It prints nothing.
//
// Like Haul, it starts the next files at the end of a loop turn, not inside the callback that saw
// a file end. Started inside the callback (hiperfifo's way), each request went out alone while
// nginx was idle: nginx slept and was woken about once per file (8,900 wake-ups for 10,000 files,
// against 260-300 this way) and the program took 0.88-1.18 s instead of 0.79-0.88 s here.
//
//   cc -O2 events.c -lcurl -levent -o events && ./events BASE COUNT WIDTH OUTDIR
//
// With FLOOR_HTTP2=CA-FILE (BASE an https URL), it asks for HTTP/2 in Haul's shape (load.sh's
// HTTP/2 rows): streams multiplexed, at most 8 a connection (CURLMOPT_MAX_CONCURRENT_STREAMS) and
// ceil(WIDTH / 8) connections to the host, each request waiting for a connection to say whether it
// multiplexes (CURLOPT_PIPEWAIT), the certificate checked against CA-FILE: what libcurl's HTTP/2
// costs a body with nothing of Haul's beside it, against h2load in the same shape.
#include <event2/event.h>
#include <stdlib.h>

#include "slots.h"

struct watch { struct event *event; };

static struct event_base *base;
static struct event *timer;
static CURLM *multi;
static struct slot *slots;
static int count, next_index, done, failed;
static struct slot **ended;  // slots whose file ended this turn, started again at its end
static int ended_count;
static const char *http2;  // FLOOR_HTTP2: the CA file, when the bodies come over HTTP/2

static void collect(void) {
    CURLMsg *message;
    int queued;
    while ((message = curl_multi_info_read(multi, &queued))) {
        if (message->msg != CURLMSG_DONE) continue;
        struct slot *slot;
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&slot);
        long version = 0;
        if (http2) curl_easy_getinfo(message->easy_handle, CURLINFO_HTTP_VERSION, &version);
        if (http2 && version != CURL_HTTP_VERSION_2_0) {
            fprintf(stderr, "events: file %d came over HTTP/1, not HTTP/2\n", slot->index);
            failed = 1;
            event_base_loopbreak(base);
            return;
        }
        if (message->data.result != CURLE_OK || finish_body(slot) != 0) {
            fprintf(stderr, "events: file %d failed: %s\n", slot->index, curl_easy_strerror(message->data.result));
            failed = 1;
            event_base_loopbreak(base);
            return;
        }
        done++;
        curl_multi_remove_handle(multi, slot->easy);
        ended[ended_count++] = slot;
    }
    if (done == count) event_base_loopbreak(base);
}

static void socket_ready(evutil_socket_t fd, short flags, void *unused) {
    (void)unused;
    int mask = (flags & EV_READ ? CURL_CSELECT_IN : 0) | (flags & EV_WRITE ? CURL_CSELECT_OUT : 0);
    int running;
    curl_multi_socket_action(multi, fd, mask, &running);
    collect();
}

static void timer_fired(evutil_socket_t fd, short flags, void *unused) {
    (void)fd; (void)flags; (void)unused;
    int running;
    curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
    collect();
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *unused, void *socket_pointer) {
    (void)easy; (void)unused;
    struct watch *watch = socket_pointer;
    if (what == CURL_POLL_REMOVE) {
        if (watch) { event_free(watch->event); free(watch); }
        return 0;
    }
    short flags = EV_PERSIST | (what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0);
    if (!watch) {
        watch = malloc(sizeof *watch);
        watch->event = event_new(base, fd, flags, socket_ready, NULL);
        curl_multi_assign(multi, fd, watch);
    } else {
        event_del(watch->event);
        event_assign(watch->event, base, fd, flags, socket_ready, NULL);
    }
    event_add(watch->event, NULL);
    return 0;
}

static int on_timer(CURLM *unused, long milliseconds, void *context) {
    (void)unused; (void)context;
    if (milliseconds < 0) { event_del(timer); return 0; }
    struct timeval delay = { milliseconds / 1000, (milliseconds % 1000) * 1000 };
    event_add(timer, &delay);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: events BASE COUNT WIDTH OUTDIR\n"); return 2; }
    base_url = argv[1];
    count = atoi(argv[2]);
    int width = atoi(argv[3]);
    outdir = argv[4];
    curl_global_init(CURL_GLOBAL_DEFAULT);
    base = event_base_new();
    timer = evtimer_new(base, timer_fired, NULL);
    multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)width);
    http2 = getenv("FLOOR_HTTP2");
    if (http2) {
        curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
        curl_multi_setopt(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, 8L);
        curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)((width + 7) / 8));
    }
    slots = calloc((size_t)width, sizeof *slots);
    for (int i = 0; i < width && next_index < count; i++) {
        make_easy(&slots[i]);
        if (http2) {
            curl_easy_setopt(slots[i].easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
            curl_easy_setopt(slots[i].easy, CURLOPT_PIPEWAIT, 1L);
            curl_easy_setopt(slots[i].easy, CURLOPT_CAINFO, http2);
        }
        start(multi, &slots[i], next_index++);
    }
    ended = calloc((size_t)width, sizeof *ended);
    while (!failed && done < count) {
        if (event_base_loop(base, EVLOOP_ONCE) < 0) return 1;
        while (ended_count > 0 && next_index < count) start(multi, ended[--ended_count], next_index++);
        ended_count = 0;
    }
    return failed || done != count;
}
