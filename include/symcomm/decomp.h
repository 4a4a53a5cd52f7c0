/*
 * symcomm pencil decomposition: a 3D grid of gdims[0] x gdims[1] x gdims[2] points (x, y,
 * z; x varies fastest in the default memory order) split over a 2D process grid of
 * pr x pc ranks as pencils, in the manner of cuDecomp.
 *
 *   X-pencils: x complete on every rank; y split over the pr rows, z over the pc columns.
 *   Y-pencils: y complete; x split over the rows, z over the columns.
 *   Z-pencils: z complete; x split over the rows, y over the columns.
 *
 * Rank r sits at row r / pc, column r % pc (row-major), or at row r % pr, column r / pr
 * (column-major). A dimension of n points split over p parts gives part k
 * n / p + (k < n % p) points starting at k * (n / p) + min(k, n % p): uneven splits are
 * allowed, the first parts holding one point more.
 *
 * This header has the grid descriptor, the pencil geometry, transposes between pencils and
 * halo exchanges (docs/decomp.md).
 */
#ifndef SYMCOMM_DECOMP_H_
#define SYMCOMM_DECOMP_H_

#include "symcomm/symcomm.h"

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

typedef enum { symcommRowMajor = 0, symcommColumnMajor = 1 } symcommRankOrder_t;

/* Element types of transposes: real and complex, single and double precision. */
typedef enum { symcommR32 = 0, symcommR64 = 1, symcommC32 = 2, symcommC64 = 3 } symcommDecompType_t;

typedef struct {
  size_t struct_size;     /* sizeof(symcommDecompConfig_t)                                  */
  uint32_t magic;         /* set by symcommDecompConfigInit                                 */
  int64_t gdims[3];       /* global points along x, y, z (each >= 1)                        */
  int pdims[2];           /* pr x pc (pr * pc = the communicator's size), or 0 x 0 to autotune */
  symcommRankOrder_t rank_order;
  /* For the X, Y and Z pencil: 0 keeps the memory order x, y, z (x fastest); 1 makes the
   * pencil's complete axis the fastest, the others following cyclically (Y: y, z, x;
   * Z: z, x, y), as cuDecomp's axis-contiguous layouts. */
  int axis_contiguous[3];
  /* Transpose backend by name ("copy", ...; symcommDecompBackendName lists them), "" for the
   * first registered one that can run on the communicator (and the process grid; one meant
   * for ranks out of load/store reach only where some rank is: for_unmapped_ranks of
   * symcommDecompBackendInfo_t), or "auto" to autotune among them. */
  char backend[32];
  /* Autotuning (pdims 0 x 0, backend "auto" or halo_backend "auto"; docs/decomp.md):
   *
   * Grid and transpose backend: every candidate grid (each factorisation pr x pc, rows of
   * consecutive ranks first) times every candidate backend on X->Y, Y->Z, Z->Y, Y->X of
   * pencils of autotune_type (transposes of weight 0 are not run): autotune_warmup untimed,
   * then autotune_trials timed rounds. A round's score is the weighted sum of each
   * transpose's slowest rank; a candidate's score is the median of its timed rounds. After
   * every timed round a candidate whose median so far exceeds autotune_skip times the best
   * score yet is abandoned ("skipped" in the final table). Rank 0 prints a line per
   * candidate and the final table to stderr; the other ranks print nothing. */
  symcommDecompType_t autotune_type; /* R32, R64, C32 or C64 (default C32)                  */
  int autotune_warmup;               /* >= 0 (default 1)                                    */
  int autotune_trials;               /* >= 1 (default 5)                                    */
  double autotune_weights[4];        /* X->Y, Y->Z, Z->Y, Y->X: each >= 0, one > 0 (all 1)  */
  double autotune_skip;              /* >= 1 (default 1.5)                                  */
  /* Halo backend by name, "" for the transpose backend (default), or "auto" to autotune:
   * on the grid and transpose backend given or chosen, every candidate backend times
   * exchanges of the autotune_halo_axis pencil with halos autotune_halo_extents along every
   * global axis of a non-zero extent (periodic where autotune_halo_periods), with the same
   * rounds, median and skip rule; the fastest is the halo backend. */
  char halo_backend[32];
  /* Candidate filters (both "" by default: all): comma-separated entries; a plain entry
   * includes, one starting with '!' excludes. Where there is a plain entry only the listed
   * candidates remain; excluded ones never do. Grids as "2x4" ("1x8,2x4", "!8x1"), backends
   * by name ("copy,sm", "!nccl,!nccl_pipelined"); the backend filter applies to the
   * transpose and the halo candidates. A name that is not registered or a grid that is not
   * PxQ is an error. The environment variables SYMCOMM_DECOMP_AUTOTUNE_GRIDS and
   * _BACKENDS, where set, filter further with the same syntax; they must then be the same
   * on every rank (checked). */
  char autotune_grids[64];
  char autotune_backends[128];
  /* 0: grid autotuning skips grids that split a dimension unevenly (gdims[0] or gdims[1]
   * not a multiple of pr, gdims[1] or gdims[2] not a multiple of pc); 1 (default, as
   * cuDecomp): every grid is a candidate. */
  int autotune_allow_uneven;
  /* The halo autotuner's exchanges (halo_backend "auto"): the pencil axis (0 X, 1 Y, 2 Z;
   * default 0), halo points per global axis (>= 0, one > 0; default 1, 1, 1) and
   * periodicity per global axis (default 1, 1, 1). */
  int autotune_halo_axis;
  int64_t autotune_halo_extents[3];
  int autotune_halo_periods[3];
} symcommDecompConfig_t;

#define SYMCOMM_DECOMP_CONFIG_MAGIC 0x53594443u /* "SYDC" */

symcommResult_t symcommDecompConfigInit(symcommDecompConfig_t* config);

typedef struct symcommDecomp* symcommDecomp_t;

/* Collective over the communicator: every rank passes the same configuration (checked). */
symcommResult_t symcommDecompCreate(symcommComm_t comm, const symcommDecompConfig_t* config,
                                    symcommDecomp_t* decomp);
/* No transpose or halo exchange of `decomp` may still be in flight: synchronise the streams
 * they ran on first (as for symcommTeamDestroy). Its teams' ids, barrier state and internal
 * buffers are reused at once by the next decomposition or team that is made. */
symcommResult_t symcommDecompDestroy(symcommDecomp_t decomp);
/* The registered backends' names, and the ones a decomposition uses for its transposes and
 * for its halo exchanges. */
int symcommDecompBackendCount(void);
const char* symcommDecompBackendName(int index);
/* What the registered backend `index` needs to run, as data: symcommDecompCreate refuses it
 * where one of these is missing, saying which. */
typedef struct {
  const char* name;          /* as symcommDecompBackendName                                   */
  unsigned spaces;           /* the memory spaces it runs in: bits 1u << symcommMemorySpace_t */
  int load_store_peers;      /* it loads and stores every rank's heap: every rank must be
                              * load/store accessible (one node; peer access between GPUs)   */
  int nccl;                  /* NCCL moves its data: NCCL must load, and the ranks of each row
                              * and column of the grid must have a GPU each                  */
  int copies_wait_for_peers; /* it copies to or from a peer only once that peer has joined the
                              * exchange: where one never calls, the others' buffers stay
                              * untouched and the call ends at SYMCOMM_WAIT_TIMEOUT          */
  int for_unmapped_ranks;    /* it is meant for ranks out of load/store reach (other nodes):
                              * where every rank is symcommPeerAccessible, backend "" and the
                              * autotuner leave it out unless it is named (as the backend, or
                              * by an including entry of autotune_backends)                  */
} symcommDecompBackendInfo_t;
symcommResult_t symcommDecompGetBackendInfo(int index, symcommDecompBackendInfo_t* info);
symcommResult_t symcommDecompGetBackend(symcommDecomp_t decomp, const char** name);
symcommResult_t symcommDecompGetHaloBackend(symcommDecomp_t decomp, const char** name);

/* What this rank's transposes and halo exchanges of `decomp` handed to the transports since
 * the decomposition was made, in bytes (docs/decomp.md, "Across nodes"): to peers reached by
 * load/store and to peers reached over the network, each split by where the bytes came
 * from. A block goes from the caller's buffer itself only where it is one contiguous run of
 * it and the transport takes that buffer as it is (the staging rule: the network takes the
 * symmetric heap, and registered buffers where it reaches those); otherwise it is packed into
 * the workspace first. Counted by the backends that send through the transports
 * ("transport"); the others count nothing. Local: no communication. */
typedef struct {
  uint64_t load_store_from_buffer;    /* to load/store peers, straight from the caller's buffer */
  uint64_t load_store_from_workspace; /* to load/store peers, packed into the workspace first  */
  uint64_t network_from_buffer;       /* to network peers, straight from the caller's buffer    */
  uint64_t network_from_workspace;    /* to network peers, packed into the workspace first      */
} symcommDecompTraffic_t;
symcommResult_t symcommDecompGetTraffic(symcommDecomp_t decomp, symcommDecompTraffic_t* traffic);

/* The configuration in force: pdims, backend and halo_backend as given or as autotuning
 * chose them (never "" or "auto"). */
symcommResult_t symcommDecompGetConfig(symcommDecomp_t decomp, symcommDecompConfig_t* config);

/* This rank's row and column in the process grid. */
symcommResult_t symcommDecompGridCoords(symcommDecomp_t decomp, int* row, int* col);

/* What this rank holds of the pencil whose complete axis is `axis` (0 x, 1 y, 2 z). */
typedef struct {
  int axis;          /* the complete axis                                                   */
  int order[3];      /* memory order: order[0] is the global axis that varies fastest       */
  int64_t lo[3];     /* first global index owned, per global axis (x, y, z)                 */
  int64_t hi[3];     /* one past the last global index owned, per global axis               */
  int64_t halo[3];   /* halo points on each side, per global axis                           */
  int64_t padding[3];/* extra points after the halo at the high end, per global axis        */
  int64_t shape[3];  /* allocated extents in memory order: owned + 2 halo + padding         */
  int64_t size;      /* elements to allocate: shape[0] * shape[1] * shape[2]                */
} symcommPencilInfo_t;

/* The element index of global point (x, y, z) (a halo point too) in a buffer laid out as
 * `p` says. */
static inline int64_t symcommPencilIndex(const symcommPencilInfo_t* p, int64_t x, int64_t y,
                                         int64_t z) {
  const int64_t g[3] = {x, y, z};
  int64_t index = 0;
  for (int i = 2; i >= 0; --i) {
    const int a = p->order[i];
    index = index * p->shape[i] + (g[a] - p->lo[a] + p->halo[a]);
  }
  return index;
}

/* `halo` and `padding` (per global axis, >= 0) may be NULL for none. */
symcommResult_t symcommDecompPencilInfo(symcommDecomp_t decomp, int axis, const int64_t halo[3],
                                        const int64_t padding[3], symcommPencilInfo_t* info);


/* Bytes of symmetric workspace (symcommMalloc it) that transposes of `type` need. */
symcommResult_t symcommDecompWorkspaceSize(symcommDecomp_t decomp, symcommDecompType_t type,
                                           size_t* bytes);

/* Collective over the ranks that exchange (the column of the process grid for X <-> Y, the
 * row for Y <-> Z; every rank of the grid calls it): rearranges this rank's `from` pencil
 * (axis 0, 1, 2 for X, Y, Z) in `input` into its `to` pencil in `output`, on `stream`.
 * Allowed: X->Y, Y->Z, Z->Y, Y->X. Halos and paddings (may be NULL) describe each buffer's
 * layout as in symcommDecompPencilInfo; halo points are neither read nor written. input and
 * output may be the same buffer (large enough for both pencils). `workspace` is a symmetric
 * buffer with symcommDecompWorkspaceSize bytes from `workspace` to the end of its
 * allocation, the same object on every rank, aligned to 16 bytes, and overlapping neither
 * input nor output; input and output are aligned to the size of their elements. A halo or
 * padding whose pencil would exceed 2^55 points is refused (symcommInvalidArgument).
 *
 * input and output are each either symmetric (symcommMalloc, holding the pencil within the
 * allocation) on every rank, the same object and with the same halo and padding, or
 * non-symmetric on every rank: backends read peers' symmetric inputs or write into their
 * symmetric outputs directly, and each rank chooses that path from its own arguments.
 * SYMCOMM_DECOMP_CHECK checks it at every call with a host round trip (by default in the
 * host memory space only; =1 in the cuda space too), failing every rank with
 * symcommInvalidUsage. A non-symmetric buffer must be memory the
 * communicator's device accesses at that address: in the cuda memory space device memory of
 * its GPU, managed memory, or pinned host memory, not pageable host memory
 * (symcommInvalidArgument). */
symcommResult_t symcommDecompTranspose(symcommDecomp_t decomp, int from, int to, const void* input,
                                       void* output, void* workspace, symcommDecompType_t type,
                                       const int64_t in_halo[3], const int64_t in_padding[3],
                                       const int64_t out_halo[3], const int64_t out_padding[3],
                                       symcommStream_t stream);

/* Bytes of symmetric workspace that symcommDecompHalo needs for these arguments. */
symcommResult_t symcommDecompHaloWorkspaceSize(symcommDecomp_t decomp, int axis, int dim,
                                               symcommDecompType_t type, const int64_t halo[3],
                                               const int64_t padding[3], size_t* bytes);

/* Collective over the ranks of the process grid: fills the halo of this rank's `axis` pencil
 * in `buffer` along global axis `dim` (0, 1, 2) from its neighbours (or, along an axis that is
 * not split, from its own far side), wrapping around where periodic[dim] is non-zero and
 * leaving the halo alone at a non-periodic boundary. The slabs span the halos of the other
 * axes too, so exchanging x, then y, then z fills the corners. Every part of a split axis
 * must hold at least halo[dim] points. `workspace`: symcommDecompHaloWorkspaceSize bytes,
 * symmetric, the same object on every rank, aligned to 16 bytes and apart from `buffer`.
 * `buffer` follows the transposes' rules: symmetric on every rank (the same object) or on
 * none, accessible to the device, aligned to the size of its elements. */
symcommResult_t symcommDecompHalo(symcommDecomp_t decomp, int axis, int dim, void* buffer,
                                  void* workspace, symcommDecompType_t type, const int64_t halo[3],
                                  const int64_t padding[3], const int periodic[3],
                                  symcommStream_t stream);

#pragma GCC visibility pop
#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SYMCOMM_DECOMP_H_ */
