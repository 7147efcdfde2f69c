/* libwarmarena.so linked into a program (`cc ... -lwarmarena`, with an
 * rpath), not preloaded: run by tests/preload.rs without LD_PRELOAD.
 * Checks that the process's malloc is the library's and that the
 * program's own allocations, and glibc's internal ones (strdup), are
 * served by the arena, as mallinfo2's figures (the arena's stats) show.
 * Prints "ok link" and exits 0, or prints what failed and exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define N 100

int main(void) {
    const char *pre = getenv("LD_PRELOAD");
    CHECK(pre == NULL || pre[0] == 0);

    /* The process's malloc (the first definition in the global scope) is
     * the library's, not glibc's. */
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info;
    CHECK(m != NULL && dladdr(m, &info) && info.dli_fname != NULL);
    if (m && dladdr(m, &info) && info.dli_fname) {
        printf("malloc from %s\n", info.dli_fname);
        CHECK(strstr(info.dli_fname, "libwarmarena") != NULL);
    }

    /* N small blocks and a glibc-internal allocation: each is one more live
     * arena buffer, and the arena's live bytes grow by exactly their usable
     * sizes. (glibc's mallinfo2 counts only mmapped chunks in hblks, so
     * these checks fail for its allocator.) */
    void *warmup = malloc(100); /* the thread enters the arena */
    size_t warmup_usable = malloc_usable_size(warmup);
    struct mallinfo2 before = mallinfo2();
    void *p[N];
    size_t usable = 0;
    for (int i = 0; i < N; i++) {
        p[i] = malloc(100 + (size_t)i);
        CHECK(p[i] != NULL);
        if (p[i]) memset(p[i], i, 100 + (size_t)i);
        usable += malloc_usable_size(p[i]);
    }
    char *s = strdup("allocated inside glibc");
    CHECK(s != NULL);
    usable += malloc_usable_size(s);
    struct mallinfo2 after = mallinfo2();
    printf("live buffers %zu -> %zu, live bytes %zu -> %zu (usable %zu), mapped %zu\n",
           before.hblks, after.hblks, before.uordblks, after.uordblks, usable,
           after.arena);
    CHECK(after.hblks == before.hblks + N + 1);
    CHECK(after.uordblks == before.uordblks + usable);
    CHECK(after.arena > 0);

    /* A large buffer: the arena's too. */
    void *big = malloc(8 << 20);
    CHECK(big != NULL);
    CHECK(mallinfo2().hblks == after.hblks + 1);
    free(big);

    for (int i = 0; i < N; i++) free(p[i]);
    free(s);
    free(warmup);
    struct mallinfo2 end = mallinfo2();
    CHECK(end.hblks == before.hblks - 1);
    CHECK(end.uordblks + warmup_usable == before.uordblks);

    if (failures) {
        fprintf(stderr, "link: %d checks failed\n", failures);
        return 1;
    }
    printf("ok link\n");
    return 0;
}
