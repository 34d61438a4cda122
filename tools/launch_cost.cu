// Host cost of one kernel launch on this machine, by launch form, with the GPU held busy by a
// spin kernel queued first (so a launch only enters the queue; the spin must outlast the loop).
// What it separates: the runtime's plain launch, cudaLaunchKernelEx, and the attribute the
// DSL's launch wrappers pass (programmatic stream serialization, PDL), from the wrappers' own cost
// (tools/host_overhead.py measures those).
//   nvcc -O2 -arch=sm_90a -o /tmp/launch_cost tools/launch_cost.cu && /tmp/launch_cost
#include <algorithm>
#include <chrono>
#include <vector>
#include <cstdio>
#include <cuda_runtime.h>

__global__ void spin(long long ns) {
    long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 > ns) break;
        __nanosleep(1000);
    }
}

__global__ void empty(int *p, int a, int b, int c) {
    if (p != nullptr && threadIdx.x == 1024) p[0] = a + b + c;   // never true: keeps the params
}

// One sample: n launches of one form behind a 20 ms spin kernel, host microseconds per launch.
template <class F>
static double sample(F launch, cudaStream_t s, int n) {
    spin<<<1, 1, 0, s>>>(20 * 1000 * 1000);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) launch();
    auto t1 = std::chrono::steady_clock::now();
    if (cudaStreamQuery(s) != cudaErrorNotReady) fprintf(stderr, "spin ended early\n");
    cudaStreamSynchronize(s);
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main() {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaFree(nullptr);
    const int n = 100, rounds = 15;
    int *p = nullptr;
    int a = 1, b = 2, c = 3;
    void *args[] = {&p, &a, &b, &c};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = 2;
    attr[1].val.clusterDim.y = 1;
    attr[1].val.clusterDim.z = 1;
    auto ex = [&](unsigned num_attrs) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(132);
        cfg.blockDim = dim3(128);
        cfg.stream = s;
        cfg.attrs = attr;
        cfg.numAttrs = num_attrs;
        cudaLaunchKernelExC(&cfg, (const void *)empty, args);
    };
    // the forms interleaved round by round, so a drift of the host's speed hits each alike
    std::vector<double> t[4];
    for (int r = 0; r < rounds; ++r) {
        t[0].push_back(sample([&] { empty<<<132, 128, 0, s>>>(nullptr, 1, 2, 3); }, s, n));
        t[1].push_back(sample([&] { ex(0); }, s, n));
        t[2].push_back(sample([&] { ex(1); }, s, n));
        t[3].push_back(sample([&] { ex(2); }, s, n));
    }
    printf("| launch form (host us per launch, GPU kept busy, median of %d x %d) | us |\n|---|---|\n", rounds, n);
    printf("| <<<>>> | %.2f |\n| cudaLaunchKernelEx | %.2f |\n", median(t[0]), median(t[1]));
    printf("| cudaLaunchKernelEx + PDL | %.2f |\n| cudaLaunchKernelEx + PDL + cluster 2 | %.2f |\n",
           median(t[2]), median(t[3]));
    cudaError_t e = cudaDeviceSynchronize();
    printf("%s\n", cudaGetErrorString(e));
    return 0;
}
