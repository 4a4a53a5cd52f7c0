/*
 * Joining a symcomm communicator from an MPI communicator. Header-only, so that libsymcomm
 * does not depend on MPI and works with any MPI implementation: include this header after
 * <mpi.h> in code that you compile with your MPI.
 *
 *   symcommComm_t comm;
 *   symcommInitFromMpi(&comm, MPI_COMM_WORLD, NULL);
 *
 * Collective over `mpi_comm`: rank 0 of it creates a unique id (which starts the bootstrap
 * root in its process), MPI_Bcast gives the id to all, and every rank joins with its MPI
 * rank. The symcomm communicator then lives on its own: MPI is not used again.
 */
#ifndef SYMCOMM_SYMCOMM_MPI_H_
#define SYMCOMM_SYMCOMM_MPI_H_

#include <mpi.h>

#include "symcomm/symcomm.h"

static inline symcommResult_t symcommInitFromMpi(symcommComm_t* comm, MPI_Comm mpi_comm,
                                                 const symcommConfig_t* config) {
  int rank = 0, size = 0;
  if (MPI_Comm_rank(mpi_comm, &rank) != MPI_SUCCESS || MPI_Comm_size(mpi_comm, &size) != MPI_SUCCESS)
    return symcommInvalidArgument;
  symcommUniqueId uid;
  /* Rank 0 also broadcasts whether it got an id, so that a failure there fails everyone. */
  struct {
    int result;
    symcommUniqueId uid;
  } msg;
  msg.result = rank == 0 ? (int)symcommGetUniqueId(&msg.uid) : 0;
  if (MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, mpi_comm) != MPI_SUCCESS)
    return symcommSystemError;
  if (msg.result != (int)symcommSuccess) return (symcommResult_t)msg.result;
  uid = msg.uid;
  return symcommInit(comm, size, rank, &uid, config);
}

#endif /* SYMCOMM_SYMCOMM_MPI_H_ */
