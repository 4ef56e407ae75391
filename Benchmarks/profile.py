"""Where a body's CPU goes (issue 61, item 1): reads `perf script` output of a whole process (every
thread, with call chains) and attributes each sample twice: to what Haul was doing for the body
(the innermost frame of the chain that names one of Haul's activities), and to what paid for it (the
sample's own frame: Haul's code, the Swift runtime's reference counting and allocation, task
switches, libcurl, TLS, the kernel's network or files…). Prints one JSON object: microseconds of CPU
per body in each cell: the samples' shares of the CPU the command used without perf (given), or
else the samples themselves at the sampling frequency.

    perf record -F 1999 --call-graph dwarf,16384 -o perf.data -- haul-bench many haul BASE 10000 100 OUT
    perf script -i perf.data -F tid,ip,sym,dso | python3 profile.py SCENARIO 10000 1999 [CPU-SECONDS]

The activities are matched on mangled Swift names (substrings a rename would break: then the row
falls to the one around it, and the table says "other Haul"). They are approximate by design: a
sample counts for the innermost activity on its stack.
"""
import json
import os
import re
import sys

# What Haul does for a body, innermost first (a frame matching an earlier entry wins over one that
# matches a later entry only when it is deeper in the stack: the walk goes from the leaf up).
ACTIVITIES = [
    ("events and hand-off", [r"EventHub", r"EventFeed", r"Subscribers", r"Scc6resume", r"Continuation",
                             r"DownloadEvents", r"DownloadManagerEvents", r"nextBatch"]),
    ("journal rows", [r"7JournalC", r"MemoryRows", r"RowStore", r"JournalRow", r"sqlite3_"]),
    ("state machine", [r"DownloadStateMachine", r"QueueState"]),
    ("body chunks", [r"writeCallback", r"receiveChunk", r"receive_2on", r"BodyCollector", r"BufferPool",
                     r"WriteBuffer"]),
    ("headers and answer", [r"headerCallback", r"decideResponse", r"ResponseHead", r"ResponseDecision",
                            r"acceptBody", r"Segments6answer"]),
    ("handle set-up and request", [r"EasyHandle", r"startRequest", r"6launch", r"Connection5begin",
                                   r"curl_easy_setopt", r"CHaul_easy"]),
    ("disk writes", [r"PartialRemainder", r"DiskLane", r"Disk", r"FileSink", r"Checkpoint", r"pwrite", r"fsync"]),
    ("completion (rename, end)", [r"endCompleted", r"6placed", r"Placer", r"PlacedFile", r"requestEnded",
                                  r"ended7request"]),
    ("admission", [r"admitWaiting", r"5admit", r"Admission", r"nextQueued", r"DescriptorBudget"]),
    ("the caller's request", [r"DownloadQueue", r"DownloadRequest", r"8download", r"4data4from",
                              r"7discard4from", r"Catalog",
                              # The reply a caller waits on for its row (the loop answers it):
                              # its module's name would count it in "reactor turn" below.
                              r"HaulScheduler5ReplyC"]),
    ("the caller's task", [r"HaulBench", r"LoadCommand", r"7bounded", r"BenchSupport", r"^main$", r"haul_bench_main"]),
    # libcurl's own work for the transfers (reading sockets, parsing HTTP), under the reactor's call;
    # Haul's callbacks it calls are deeper in the stack and matched first.
    ("libcurl's work (sockets, HTTP)", [r"^Curl_", r"^curl_multi", r"^multi_", r"^curl_easy", r"^Curl"]),
    ("reactor turn", [r"Reactor", r"Scheduler", r"event_base_loop"]),
]
ACTIVITY_PATTERNS = [(name, re.compile("|".join(patterns))) for name, patterns in ACTIVITIES]


def payer(symbol, dso, chain):
    """What paid for a sample: its own frame's library or kind."""
    if "kernel" in dso:
        stack = " ".join(symbol for symbol, _ in chain)
        if re.search(r"futex|schedule|try_to_wake_up|finish_task_switch|wake_up", stack):
            return "kernel: wake-ups, switches"
        if re.search(r"tcp_|sock_|inet_|skb|ip_|__sys_recv|__sys_send|sys_recvfrom|sys_sendto|_copy_to_iter", stack):
            return "kernel: network"
        if re.search(r"ext4|shmem|vfs_|do_sys_open|rename|unlink|filemap|fsync|page_cache|fallocate", stack):
            return "kernel: files"
        if re.search(r"epoll|poll", stack):
            return "kernel: polling"
        return "kernel: other"
    if "libswiftCore" in dso:
        if re.search(r"retain|release|RefCount|Unowned|weak", symbol, re.I):
            return "reference counting"
        if re.search(r"alloc|dealloc|slowAlloc|slowDealloc", symbol, re.I):
            return "allocation"
        return "Swift runtime, other"
    if "libc.so" in dso or "libc-" in dso:
        if re.search(r"malloc|free|_int_|calloc|realloc|unlink_chunk|tcache", symbol):
            return "allocation"
        if re.search(r"mem(move|cpy|set|cmp)|str", symbol):
            return "libc copies and strings"
        if re.search(r"pthread|futex|sem_|lll_", symbol):
            return "locks"
        return "libc, other"
    if "Concurrency" in dso or "libdispatch" in dso:
        return "tasks and executors"
    for key, name in (("libcurl", "libcurl"), ("libssl", "TLS"), ("libcrypto", "TLS"), ("nghttp2", "HTTP/2 framing"),
                      ("libevent", "libevent"), ("sqlite", "SQLite"), ("libz", "zlib"), ("Foundation", "Foundation")):
        if key in dso:
            return name
    return "Haul's code" if symbol.startswith("$s") else "other"


def samples(stream):
    """Yields each sample's thread and chain, leaf first, as (symbol, dso) pairs."""
    thread, chain = None, []
    for line in stream:
        line = line.rstrip("\n")
        if not line.strip():
            if chain:
                yield thread, chain
            thread, chain = None, []
            continue
        header = re.match(r"\s*(\d+)\s*$", line)
        if header and not chain:
            thread = header.group(1)  # the sample's header: its thread
            continue
        match = re.match(r"\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
        if match:
            symbol = re.sub(r"\+0x[0-9a-f]+$", "", match.group(1))
            chain.append((symbol, match.group(2)))
    if chain:
        yield thread, chain


def main():
    scenario, bodies, frequency = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    # The CPU the same command used without perf (its user + system seconds), if measured: the
    # samples' shares are scaled to it, since DWARF sampling itself slows the process it samples.
    measured = float(sys.argv[4]) if len(sys.argv) > 4 else None
    cells, total = {}, 0
    # The loop thread (the one in libevent's loop most often): its samples are counted apart too,
    # since where the loop is the bound, its share of the work sets the rate.
    by_thread, loop_samples = {}, {}
    for thread, chain in samples(sys.stdin):
        total += 1
        # No frame of Haul's: a thread that never entered it, or a stack that could not be unwound past
        # a C library built without frame pointers (libcurl's sockets, mostly).
        activity = "other Haul" if any(symbol.startswith("$s") for symbol, _ in chain) else "no Haul frame"
        for symbol, _ in chain:
            found = next((name for name, pattern in ACTIVITY_PATTERNS if pattern.search(symbol)), None)
            if found:
                activity = found
                break
        leaf_symbol, leaf_dso = chain[0]
        key = (activity, payer(leaf_symbol, leaf_dso, chain))
        cells[key] = cells.get(key, 0) + 1
        activities = by_thread.setdefault(thread, {})
        activities[activity] = activities.get(activity, 0) + 1
        if any(symbol == "event_base_loop" for symbol, _ in chain):
            loop_samples[thread] = loop_samples.get(thread, 0) + 1
    microseconds = (measured * 1e6 / bodies / total) if measured and total else 1e6 / frequency / bodies
    print(json.dumps({
        "scenario": scenario, "build": os.environ.get("PROFILE_BUILD", ""), "bodies": bodies, "samples": total,
        "frequency": frequency,
        "sampledMicrosecondsPerBody": round(total * 1e6 / frequency / bodies, 1),
        "microsecondsPerBody": round(total * microseconds, 1),
        "cells": [{"activity": a, "payer": p, "microsecondsPerBody": round(n * microseconds, 2)}
                  for (a, p), n in sorted(cells.items(), key=lambda item: -item[1])],
        "loop": {a: round(n * microseconds, 2) for a, n in sorted(
            by_thread.get(max(loop_samples, key=loop_samples.get), {}).items() if loop_samples else [],
            key=lambda item: -item[1])},
    }))


main()
