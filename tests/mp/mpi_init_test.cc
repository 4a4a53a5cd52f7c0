// symcommInitFromMpi (header-only): run as `mpirun -n N mp_mpi_init`.
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "symcomm/symcomm_mpi.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int mpi_rank, mpi_size;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  int failures = 0;
  symcommComm_t comm;
  symcommResult_t rc = symcommInitFromMpi(&comm, MPI_COMM_WORLD, nullptr);
  if (rc != symcommSuccess) {
    std::fprintf(stderr, "rank %d: symcommInitFromMpi: %s\n", mpi_rank, symcommGetLastError());
    failures = 1;
  } else {
    int rank = -1, size = -1;
    symcommCommRank(comm, &rank);
    symcommCommSize(comm, &size);
    failures += rank != mpi_rank || size != mpi_size;
    std::vector<int> all(static_cast<size_t>(size));
    failures += symcommHostAllgather(comm, &rank, all.data(), sizeof rank) != symcommSuccess;
    for (int r = 0; r < size; ++r) failures += all[static_cast<size_t>(r)] != r;
    failures += symcommFinalize(comm) != symcommSuccess;
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (mpi_rank == 0) std::printf("%s: symcommInitFromMpi over %d MPI ranks\n",
                                 total ? "FAILED" : "PASSED", mpi_size);
  MPI_Finalize();
  return total ? 1 : 0;
}
