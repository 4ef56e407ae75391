// Counts, for counts.sh, the work a process does that timing on a busy machine cannot show apart:
// calls to malloc (every allocation: Swift's objects and buffers, libcurl's, SQLite's), SQLite
// statements stepped (by the statement's first words) and libcurl header lookups. Preloaded
// (LD_PRELOAD); at exit it writes one "name count" line per counter to $COUNTING_OUT.
//
//   cc -O2 -shared -fPIC counting.c -o counting.so -ldl
//   COUNTING_OUT=counts.txt LD_PRELOAD=./counting.so PROGRAM ...
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);

static atomic_long mallocs, header_lookups;

void *malloc(size_t size) {
    atomic_fetch_add_explicit(&mallocs, 1, memory_order_relaxed);
    return __libc_malloc(size);
}

// SQLite's statements, by their first 40 characters (the kind: INSERT, the claim's UPDATE, ...).
typedef struct sqlite3_stmt sqlite3_stmt;
#define KINDS 128
static char *kinds[KINDS];
static long steps[KINDS];
static int kind_count;
static pthread_mutex_t kinds_lock = PTHREAD_MUTEX_INITIALIZER;

int sqlite3_step(sqlite3_stmt *statement) {
    static int (*step)(sqlite3_stmt *);
    static const char *(*sql)(sqlite3_stmt *);
    if (!step) {
        step = (int (*)(sqlite3_stmt *))dlsym(RTLD_NEXT, "sqlite3_step");
        sql = (const char *(*)(sqlite3_stmt *))dlsym(RTLD_NEXT, "sqlite3_sql");
    }
    const char *text = sql(statement);
    char kind[41];
    snprintf(kind, sizeof kind, "%s", text ? text : "?");
    for (char *c = kind; *c; c++) {
        if (*c == '\n' || *c == ' ' || *c == '\t') *c = '_';
    }
    pthread_mutex_lock(&kinds_lock);
    int index = 0;
    while (index < kind_count && strcmp(kinds[index], kind) != 0) index++;
    if (index == kind_count && kind_count < KINDS) kinds[kind_count++] = strdup(kind);
    if (index < KINDS) steps[index]++;
    pthread_mutex_unlock(&kinds_lock);
    return step(statement);
}

// libcurl's header lookups (each walks the response's headers).
int curl_easy_header(void *easy, const char *name, size_t index, unsigned int origin, int request, void **out) {
    static int (*lookup)(void *, const char *, size_t, unsigned int, int, void **);
    if (!lookup) lookup = (int (*)(void *, const char *, size_t, unsigned int, int, void **))dlsym(RTLD_NEXT, "curl_easy_header");
    atomic_fetch_add_explicit(&header_lookups, 1, memory_order_relaxed);
    return lookup(easy, name, index, origin, request, out);
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("COUNTING_OUT");
    FILE *out = path ? fopen(path, "w") : NULL;
    if (!out) return;
    fprintf(out, "malloc %ld\n", atomic_load(&mallocs));
    fprintf(out, "curl_easy_header %ld\n", atomic_load(&header_lookups));
    for (int index = 0; index < kind_count; index++) fprintf(out, "sqlite3_step:%s %ld\n", kinds[index], steps[index]);
    fclose(out);
}
