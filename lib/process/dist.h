// dist.h — data-parallel training across processes: the few collective operations the
// trainer needs, over MPI when handgrad is built with it (-DHANDGRAD_MPI), and as no-ops for
// one process otherwise. Only dist.cpp includes <mpi.h>; nothing else sees an MPI type.
//
// The scheme (trainer.cpp): every rank holds the whole model and takes its own B rows of each
// micro-batch; after the micro-batch loop the ranks sum their gradients over the flat gradient
// arena (each rank's backward was scaled by 1/(N·K)), so every rank then clips and steps AdamW
// on the same numbers and the weights stay identical without ever being sent.
//
// A rank is "launched by mpirun" when the launcher's environment variables are set
// (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE): only then is MPI_Init called, so the same
// binary run on its own never starts MPI's runtime (no singleton init, no extra processes).
#pragma once
#include <cstddef>
#include <cstdint>

namespace hg {

struct Dist {
    int rank = 0;        // this process, 0 .. size-1; rank 0 prints and writes checkpoints
    int size = 1;        // N, the number of ranks
    int local_size = 1;  // ranks on this host (they share its cores)
    bool mpi = false;    // MPI was initialised (dist_finalize / dist_abort then talk to it)
};

// True when this build has MPI in it.
bool dist_built_with_mpi();
// Starts MPI if launched by mpirun (see above); otherwise, or without MPI, one process.
// Launched by mpirun with a build that has no MPI: throws hg::Error (N copies would each
// train alone and overwrite one another's checkpoints).
Dist dist_init(int* argc, char*** argv);
void dist_finalize(const Dist& d);
// Ends every rank of the job at once, with exit code `code` (MPI_Abort); without MPI, exit().
[[noreturn]] void dist_abort(const Dist& d, int code);

// x ← Σ over ranks of x, in place, identical on every rank afterwards. n may exceed INT_MAX.
void dist_sum(const Dist& d, float* x, size_t n);
// The mean over ranks of one number.
double dist_mean(const Dist& d, double x);
// True if `flag` is true on any rank.
bool dist_any(const Dist& d, bool flag);
// True if every rank passes the same value (e.g. a hash of the weights).
bool dist_agree(const Dist& d, uint64_t value);

}  // namespace hg
