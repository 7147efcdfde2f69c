/* The multi-threaded program of scripts/preload-bench.sh: requests flow
 * from producer threads to consumer threads, which free them (frees on
 * another thread); each request also takes large temporaries that are
 * freed before the next (repeated work: the same sizes every round) and
 * grows a buffer with realloc. Prints a checksum that does not depend on
 * the allocator or the thread schedule.
 *
 *   prodcons [PRODUCERS CONSUMERS REQUESTS_PER_PRODUCER]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QLEN 256

struct msg {
    size_t len;
    uint64_t sum;
    unsigned char *body;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t more, room;
    struct msg items[QLEN];
    int head, tail, count, open;
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};

static int requests = 4000;
static uint64_t total_sum;
static pthread_mutex_t total_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static void *producer(void *arg) {
    uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;
    for (int i = 0; i < requests; i++) {
        seed = mix(seed + (uint64_t)i);
        /* a request: a body of 64 B .. 96 KiB, built by realloc growth */
        size_t len = 64 + seed % (96 << 10);
        unsigned char *body = NULL;
        size_t have = 0;
        while (have < len) {
            size_t next = have ? have * 2 : 64;
            if (next > len) next = len;
            body = realloc(body, next);
            for (size_t k = have; k < next; k++) body[k] = (unsigned char)(k * 31 + (size_t)seed);
            have = next;
        }
        /* its temporaries: a few large buffers, the same sizes per round */
        size_t tmp = ((size_t)1 << 20) << (i % 3);
        unsigned char *a = malloc(tmp), *b = malloc(tmp / 2);
        memset(a, (int)(seed & 0xff), tmp);
        memcpy(b, a + tmp / 4, tmp / 2);
        uint64_t s = 0;
        for (size_t k = 0; k < tmp / 2; k += 4096) s += b[k];
        for (size_t k = 0; k < len; k += 61) s += body[k];
        free(b);
        free(a);
        /* small objects that live for the request */
        void *small[32];
        for (int k = 0; k < 32; k++) {
            small[k] = malloc(16 + (size_t)k * 24);
            memset(small[k], k, 16);
        }
        for (int k = 0; k < 32; k++) free(small[k]);
        pthread_mutex_lock(&q.mu);
        while (q.count == QLEN) pthread_cond_wait(&q.room, &q.mu);
        q.items[q.tail] = (struct msg){len, s, body};
        q.tail = (q.tail + 1) % QLEN;
        q.count++;
        pthread_cond_signal(&q.more);
        pthread_mutex_unlock(&q.mu);
    }
    pthread_mutex_lock(&q.mu);
    q.open--;
    pthread_cond_broadcast(&q.more);
    pthread_mutex_unlock(&q.mu);
    return NULL;
}

static void *consumer(void *arg) {
    uint64_t local = 0;
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&q.mu);
        while (q.count == 0 && q.open > 0) pthread_cond_wait(&q.more, &q.mu);
        if (q.count == 0) {
            pthread_mutex_unlock(&q.mu);
            break;
        }
        struct msg m = q.items[q.head];
        q.head = (q.head + 1) % QLEN;
        q.count--;
        pthread_cond_signal(&q.room);
        pthread_mutex_unlock(&q.mu);
        uint64_t s = m.sum;
        for (size_t k = 0; k < m.len; k += 127) s += m.body[k];
        free(m.body);
        local += mix(s);
    }
    pthread_mutex_lock(&total_mu);
    total_sum += local; /* a sum: the order of consumers does not matter */
    pthread_mutex_unlock(&total_mu);
    return NULL;
}

int main(int argc, char **argv) {
    int producers = argc > 1 ? atoi(argv[1]) : 4;
    int consumers = argc > 2 ? atoi(argv[2]) : 4;
    if (argc > 3) requests = atoi(argv[3]);
    pthread_t t[128];
    q.open = producers;
    for (int i = 0; i < producers; i++) pthread_create(&t[i], NULL, producer, (void *)(uintptr_t)i);
    for (int i = 0; i < consumers; i++) pthread_create(&t[producers + i], NULL, consumer, NULL);
    for (int i = 0; i < producers + consumers; i++) pthread_join(t[i], NULL);
    printf("%d requests, checksum %016llx\n", producers * requests, (unsigned long long)total_sum);
    return 0;
}
