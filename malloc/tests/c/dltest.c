/* A library tests/preload.rs loads with dlopen, under several names (each
 * load a new module, so many loads grow every thread's TLS vector): it has
 * thread-local variables and a constructor that allocates. */
#include <stdlib.h>
#include <string.h>

static __thread char *tls_scratch;
static __thread int tls_calls;
static char *at_load;

__attribute__((constructor)) static void dltest_load(void) {
    at_load = malloc(4096);
    memset(at_load, 1, 4096);
}

__attribute__((destructor)) static void dltest_unload(void) {
    free(at_load);
}

int dltest_work(int i) {
    tls_calls++;
    free(tls_scratch);
    tls_scratch = malloc((size_t)(i % 17) * 1000 + 1);
    tls_scratch[0] = (char)i;
    char *s = malloc(100);
    memset(s, 2, 100);
    int r = s[5] + at_load[7] + tls_calls;
    free(s);
    return r;
}
