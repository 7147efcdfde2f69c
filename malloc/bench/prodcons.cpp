// Producer/consumer in C++ for scripts/preload-bench.sh: producers build
// requests (a std::string key, a std::vector<float> payload grown by
// push_back, a std::map of attributes) and hand them over a locked queue;
// consumers reduce and free them, so most frees happen on another thread
// than the allocation. Prints one checksum (the same under every allocator).
//   prodcons_cxx [producers] [consumers] [requests per producer]
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct Request {
    std::string key;
    std::vector<float> payload;
    std::map<std::string, long> attrs;
};

int main(int argc, char **argv) {
    int producers = argc > 1 ? atoi(argv[1]) : 4;
    int consumers = argc > 2 ? atoi(argv[2]) : 4;
    int per = argc > 3 ? atoi(argv[3]) : 20000;
    std::deque<std::unique_ptr<Request>> q;
    std::mutex m;
    std::condition_variable cv;
    int done = 0;
    std::vector<double> sums(consumers, 0.0);
    std::vector<std::thread> ts;
    for (int p = 0; p < producers; p++)
        ts.emplace_back([&, p] {
            unsigned s = 12345u + p;
            for (int i = 0; i < per; i++) {
                auto r = std::make_unique<Request>();
                r->key = "request-" + std::to_string(p) + "-" + std::to_string(i);
                s = s * 1103515245u + 12345u;
                size_t n = 16 + (s >> 8) % 4096;
                for (size_t k = 0; k < n; k++) r->payload.push_back(float(k % 7) * 0.5f);
                for (int k = 0; k < 4; k++) r->attrs["attr" + std::to_string(k)] = long(i) * k;
                std::lock_guard<std::mutex> g(m);
                q.push_back(std::move(r));
                cv.notify_one();
            }
            std::lock_guard<std::mutex> g(m);
            done++;
            cv.notify_all();
        });
    for (int c = 0; c < consumers; c++)
        ts.emplace_back([&, c] {
            for (;;) {
                std::unique_ptr<Request> r;
                {
                    std::unique_lock<std::mutex> g(m);
                    cv.wait(g, [&] { return !q.empty() || done == producers; });
                    if (q.empty()) return;
                    r = std::move(q.front());
                    q.pop_front();
                }
                double acc = double(r->key.size());
                for (float x : r->payload) acc += x;
                for (auto &kv : r->attrs) acc += double(kv.second);
                sums[c] += acc;
            }
        });
    for (auto &t : ts) t.join();
    double total = 0;
    for (double x : sums) total += x;
    printf("%.1f\n", total);
    return 0;
}
