// dist.cpp — the collectives of dist.h over MPI, or their one-process versions (see dist.h).
#include "lib/process/dist.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "lib/core/errors.h"

#ifdef HANDGRAD_MPI
#include <mpi.h>
#endif

namespace hg {

#ifdef HANDGRAD_MPI

// Set by mpirun (Open MPI), by PMIx-based launchers (Open MPI 5, Slurm's srun --mpi=pmix) and
// by PMI-1/2 launchers (MPICH's hydra, srun --mpi=pmi2).
static bool launched_by_mpirun() {
    return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_SIZE");
}

bool dist_built_with_mpi() { return true; }

Dist dist_init(int* argc, char*** argv) {
    Dist d;
    if (!launched_by_mpirun()) return d;
    // Only the main thread calls MPI; OpenMP threads never do.
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    d.mpi = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &d.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d.size);
    // The ranks that share this host's memory, hence its cores.
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d.rank, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &d.local_size);
    MPI_Comm_free(&local);
    return d;
}

void dist_finalize(const Dist& d) {
    if (d.mpi) MPI_Finalize();
}

void dist_abort(const Dist& d, int code) {
    if (d.mpi) MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);
}

void dist_sum(const Dist& d, float* x, size_t n) {
    if (d.size == 1) return;
    // MPI counts are int: a model past 2^31 parameters goes in pieces.
    for (size_t i = 0; i < n; i += size_t(INT_MAX)) {
        const int count = int(std::min(n - i, size_t(INT_MAX)));
        MPI_Allreduce(MPI_IN_PLACE, x + i, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
}

double dist_mean(const Dist& d, double x) {
    if (d.size == 1) return x;
    double sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / d.size;
}

bool dist_any(const Dist& d, bool flag) {
    if (d.size == 1) return flag;
    int in = flag ? 1 : 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    return out != 0;
}

bool dist_agree(const Dist& d, uint64_t value) {
    if (d.size == 1) return true;
    uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&value, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&value, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

#else  // one process: every collective is the identity

bool dist_built_with_mpi() { return false; }

Dist dist_init(int*, char***) {
    const char* n = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = std::getenv("PMI_SIZE");
    check(!n || std::atoi(n) <= 1,
          "this handgrad was built without MPI, so under mpirun each rank would train alone; "
          "install libopenmpi-dev and rebuild (make train-mpi does both)");
    return Dist{};
}
void dist_finalize(const Dist&) {}
void dist_abort(const Dist&, int code) { std::exit(code); }
void dist_sum(const Dist&, float*, size_t) {}
double dist_mean(const Dist&, double x) { return x; }
bool dist_any(const Dist&, bool flag) { return flag; }
bool dist_agree(const Dist&, uint64_t) { return true; }

#endif

}  // namespace hg
