// The C++ test of libwarmarena.so: operator new/delete reach the
// interposed malloc/free through libstdc++ (scalar, array, aligned, sized,
// nothrow), containers grow, exceptions allocate, threads come and go.
#include <malloc.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

static int failures;
#define CHECK(c) do { if (!(c)) { std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

struct alignas(256) Wide { unsigned char b[300]; };

static void churn(int seed) {
    std::map<int, std::string> m;
    for (int i = 0; i < 2000; i++) m[(i * 7919 + seed) % 1000] = std::string(static_cast<size_t>(i % 200), 'x');
    std::vector<std::unique_ptr<std::vector<double>>> vs;
    for (int i = 0; i < 100; i++) vs.emplace_back(new std::vector<double>(static_cast<size_t>(i * 100 + seed % 7)));
    try {
        throw std::runtime_error(std::string(500, 'e'));
    } catch (const std::exception &e) {
        CHECK(std::strlen(e.what()) == 500);
    }
}

int main() {
    const char *pre = std::getenv("LD_PRELOAD");
    bool arena = pre && std::strstr(pre, "warmarena");

    int *one = new int(42);
    CHECK(*one == 42);
    if (arena) CHECK(malloc_usable_size(one) >= sizeof(int));  // ours: a known size
    delete one;

    int *many = new int[100000]();
    for (int i = 0; i < 100000; i++) CHECK(many[i] == 0);
    delete[] many;

    Wide *w = new Wide;
    CHECK(reinterpret_cast<uintptr_t>(w) % 256 == 0);
    delete w;
    Wide *ws = new Wide[10];
    CHECK(reinterpret_cast<uintptr_t>(ws) % 256 == 0);
    delete[] ws;

    void *nt = ::operator new(1000, std::nothrow);
    CHECK(nt != nullptr);
    ::operator delete(nt, std::nothrow);
    void *huge = ::operator new(static_cast<size_t>(-1) / 2, std::nothrow);
    CHECK(huge == nullptr);
    bool threw = false;
    try {
        void *p = ::operator new(static_cast<size_t>(-1) / 2);
        ::operator delete(p);
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    CHECK(threw);

    std::vector<std::string> grow;
    for (int i = 0; i < 200000; i++) grow.push_back(std::to_string(i));
    CHECK(grow[123456] == "123456");

    for (int round = 0; round < 8; round++) {
        std::vector<std::thread> ts;
        for (int i = 0; i < 32; i++) ts.emplace_back(churn, round * 32 + i);
        for (auto &t : ts) t.join();
    }
    churn(0);

    if (failures) {
        std::fprintf(stderr, "cxx: %d checks failed\n", failures);
        return 1;
    }
    std::printf("ok cxx\n");
    return 0;
}
