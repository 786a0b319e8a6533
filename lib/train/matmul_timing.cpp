// matmul_timing.cpp — see matmul_timing.h.
#include "lib/train/matmul_timing.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "lib/core/profile.h"
#include "lib/core/tensor.h"
#include "lib/kernels/bf16.h"

namespace hg {

// The floats each operand of `m` spans.
static size_t a_size(const MatmulCall& m) { return size_t(m.form == MatmulForm::TN ? m.K : m.M) * m.lda; }
static size_t b_size(const MatmulCall& m) { return size_t(m.form == MatmulForm::NT ? m.N : m.K) * m.ldb; }
static size_t c_size(const MatmulCall& m) { return size_t(m.M) * m.ldc; }

std::vector<double> time_with_backends(const std::vector<MatmulBackend>& backends, const std::function<double()>& run) {
    const MatmulBackendRestorer restore;
    for (MatmulBackend backend : backends) matmul_use(backend), run();
    const size_t n = backends.size();
    std::vector<double> best(n, 1e30), second(n, 1e30);  // each backend's two best runs
    const auto t0 = std::chrono::steady_clock::now();
    // A run can be held up for a whole scheduler tick (milliseconds) when a thread waits for a
    // core, so one run says little: turns until 2 ms a backend have passed and every backend's
    // two best runs agree within 25 %, at most 6.
    const auto settled = [&] {
        for (size_t i = 0; i < n; i++)
            if (second[i] > 1.25 * best[i]) return false;
        return seconds_since(t0) >= 0.002 * double(n);
    };
    for (int rep = 0; rep < 6 && !settled(); rep++)
        for (size_t i = 0; i < n; i++) {
            matmul_use(backends[i]);
            const double t = run();
            second[i] = std::min(second[i], std::max(best[i], t)), best[i] = std::min(best[i], t);
        }
    return best;
}

int shortened_size(const MatmulCall& m, int threads) {
    return m.nested() ? 512 : 512 * int(std::ceil(std::sqrt(double(std::max(1, threads)))));
}

MatmulCall shortened_call(const MatmulCall& m, int threads, double* scale) {
    const int cut = shortened_size(m, threads);
    MatmulCall s = m;
    *scale = 1;
    for (auto [d, at_most] : {std::pair{&s.M, cut}, {&s.N, cut}, {&s.K, kShortenedTerms}})
        if (*d > at_most) *scale *= double(*d) / at_most, *d = at_most;
    s.lda = s.form == MatmulForm::TN ? s.M : s.K;
    s.ldb = s.form == MatmulForm::NT ? s.K : s.N;
    s.ldc = s.N;
    return s;
}

// Seconds of one run of `s` (a shortened call) with each of `backends`, a bf16 call the way in
// use (matmul_bf16.h). A call made inside a parallel region of n threads is timed as n copies
// side by side, and counts 1/n. Each copy makes it several times (about 20 MFLOP in all) and
// times itself: in a step such calls follow one another inside one region, so what the region's
// start and end cost (waking the threads: milliseconds on a busy machine) is no part of theirs.
// A bf16 call on oneDNN's bf16 primitive runs no float backend: it is timed once, and that time
// stands for every backend.
static std::vector<double> time_call(const MatmulCall& s, const std::vector<MatmulBackend>& backends) {
    const int copies = s.team;
    const double flops = 2.0 * s.M * s.N * double(s.K);
    const int reps = int(std::clamp(std::ceil(2e7 / std::max(flops, 1.0)), 1.0, 100.0));
    std::vector<Arena<float>> a(copies), b(copies), c(copies);
    std::vector<Arena<bf16>> a16(copies), b16(copies);
    for (int t = 0; t < copies; t++) {
        a[t] = Arena<float>(a_size(s)), b[t] = Arena<float>(b_size(s)), c[t] = Arena<float>(c_size(s));
        for (size_t i = 0; i < a[t].size(); i++) a[t].data()[i] = float(i % 7) * 0.01f;
        for (size_t i = 0; i < b[t].size(); i++) b[t].data()[i] = float(i % 5) * 0.01f;
        if (s.bf16) {
            a16[t] = Arena<bf16>(a_size(s)), b16[t] = Arena<bf16>(b_size(s));
            bf16_round(a16[t].data(), a[t].data(), a[t].size()), bf16_round(b16[t].data(), b[t].data(), b[t].size());
        }
    }
    const auto run = [&](int t) {
        if (s.bf16) matmul_bf16_run(s, c[t].data(), a16[t].data(), b16[t].data());
        else matmul_run(s, c[t].data(), a[t].data(), b[t].data());
    };
    const bool one_way = s.bf16 && matmul_bf16_backend() == Bf16Backend::OneDNN;
    std::vector<double> seconds = time_with_backends(one_way ? std::vector<MatmulBackend>{backends[0]} : backends, [&] {
        if (copies == 1) {
            const auto t0 = std::chrono::steady_clock::now();
            run(0);
            return seconds_since(t0);
        }
        std::vector<double> each(copies, 0.0);  // a call's seconds on each thread
#pragma omp parallel num_threads(copies)
        {
            const int t = omp_get_thread_num();
            const auto t0 = std::chrono::steady_clock::now();
            for (int r = 0; r < reps; r++) run(t);
            each[t] = seconds_since(t0) / reps;
        }
        return *std::max_element(each.begin(), each.end()) / copies;
    });
    if (one_way) seconds.assign(backends.size(), seconds[0]);
    return seconds;
}

std::vector<std::vector<double>> add_up_call_times(
    size_t sets, const std::vector<std::vector<double>>& uses, const std::vector<double>& work, size_t backends,
    const std::function<std::vector<double>(size_t, const std::vector<size_t>&)>& time) {
    std::vector<bool> has_calls(sets, false);
    for (const std::vector<double>& u : uses)
        for (size_t k = 0; k < sets; k++) has_calls[k] = has_calls[k] || u[k] > 0;
    std::vector<size_t> order(work.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return work[x] > work[y]; });
    double total = 0, covered = 0;
    for (double w : work) total += w;

    std::vector<size_t> live(backends);
    for (size_t b = 0; b < backends; b++) live[b] = b;
    std::vector<double> ratio(backends, 0.0);  // a backend timed no further: its time against the fastest's
    std::vector<std::vector<double>> ms(sets, std::vector<double>(backends, 0.0));
    std::vector<double> fastest(sets, 0.0);  // each set's ms with the fastest live backend on every call
    for (size_t i : order) {
        std::vector<double> seconds = time(i, live);
        double least = 1e300;
        for (size_t b : live) least = std::min(least, seconds[b]);
        for (size_t b = 0; b < backends; b++)
            if (ratio[b] > 0) seconds[b] = ratio[b] * least;
        for (size_t k = 0; k < sets; k++) {
            for (size_t b = 0; b < backends; b++) ms[k][b] += 1000 * uses[i][k] * seconds[b];
            fastest[k] += 1000 * uses[i][k] * least;
        }
        covered += work[i];
        if (live.size() < 2 || covered < kTimedBeforeDropping * total) continue;
        // Far behind the fastest backend on every set that has calls (a set none of whose
        // calls is timed yet says nothing).
        const auto far_behind = [&](size_t b) {
            for (size_t k = 0; k < sets; k++) {
                if (!has_calls[k]) continue;
                double best = 1e300;
                for (size_t o : live) best = std::min(best, ms[k][o]);
                if (fastest[k] == 0 || ms[k][b] <= kFarBehind * best) return false;
            }
            return true;
        };
        std::vector<size_t> kept;
        for (size_t b : live) {
            if (!far_behind(b)) {
                kept.push_back(b);
                continue;
            }
            double mine = 0, best = 0;
            for (size_t k = 0; k < sets; k++) mine += ms[k][b], best += fastest[k];
            ratio[b] = mine / best;
        }
        live = kept;
    }
    return ms;
}

std::vector<std::vector<double>> time_matmul_call_sets(const std::vector<std::vector<MatmulCall>>& sets,
                                                       const std::vector<MatmulBackend>& backends, int threads) {
    std::vector<MatmulCall> distinct;       // shortened calls
    std::vector<std::vector<double>> uses;  // [distinct call][set]: the runs of it each set's time counts
    std::vector<double> work;               // [distinct call]: the multiply-adds it stands for, every set
    for (size_t k = 0; k < sets.size(); k++)
        for (const MatmulCall& m : sets[k]) {
            double scale = 1;
            const MatmulCall s = shortened_call(m, threads, &scale);
            size_t i = 0;
            while (i < distinct.size() && !distinct[i].same_call(s)) i++;
            if (i == distinct.size())
                distinct.push_back(s), uses.emplace_back(sets.size(), 0.0), work.push_back(0.0);
            const double runs = double(m.count) * scale;
            uses[i][k] += runs;
            work[i] += runs * double(s.M) * s.N * s.K / s.team;
        }
    return add_up_call_times(sets.size(), uses, work, backends.size(), [&](size_t i, const std::vector<size_t>& live) {
        std::vector<MatmulBackend> asked;
        for (size_t b : live) asked.push_back(backends[b]);
        const std::vector<double> got = time_call(distinct[i], asked);
        std::vector<double> seconds(backends.size(), 0.0);
        for (size_t j = 0; j < live.size(); j++) seconds[live[j]] = got[j];
        return seconds;
    });
}

std::vector<double> time_matmul_calls(const std::vector<MatmulCall>& calls, const std::vector<MatmulBackend>& backends,
                                      int threads) {
    return time_matmul_call_sets({calls}, backends, threads)[0];
}

}  // namespace hg
