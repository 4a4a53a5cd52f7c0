/*
 * symcomm fused communication and computation (docs/fused.md): a GEMM whose input is gathered
 * from the members of a team (all-gather + GEMM), a GEMM whose output is summed over them and
 * scattered by rows (GEMM + reduce-scatter), and a distributed transpose whose blocks are read
 * from the members and accumulated (transpose + accumulate).
 *
 * The host contract of CUTLASS: a plan per operation and shape, made collectively over a
 * team; whether it can be implemented, with the reason where not; the size of the workspace
 * it needs; runs on a stream (capturable in CUDA graphs where the implementation says so);
 * destroy. Implementations are registered by name (symcommFusedImplementationName); a plan
 * takes the one its configuration names, or the first that can implement it.
 *
 * Matrices are row-major. Team member r (its team rank) holds:
 *
 *   all-gather + GEMM:    A_r [rows[r], K], B [K, N] (the same on every member);
 *                         C = A x B [M, N] on every member, A the members' A_r stacked in
 *                         team-rank order (M = the sum of rows[]); optionally A itself
 *                         ([M, K], `gathered` of symcommFusedRun).
 *   GEMM + reduce-scatter: A_r [M, cols[r]], B_r [cols[r], N] (K = the sum of cols[]);
 *                         C_r [rows[r], N]: member r's rows of the sum over members of
 *                         A_s x B_s (M = the sum of rows[]), partial sums in fp32.
 *   transpose + accumulate: the N x N matrix X by column blocks: member r holds X_r
 *                         [N, cols[r]] (X's columns of block r; N = the sum of cols[]), and
 *                         out_r [N, cols[r]] += (X^T)'s columns of block r, which it reads
 *                         from every member's X_s (the rows of block r of each). `a` is X_r,
 *                         `c` is out_r; there is no B.
 *
 * GEMM inputs are float16 or bfloat16, accumulation is in fp32, outputs float16, bfloat16 or
 * float32. B may be given transposed (b_transposed: [N, K] row-major, as cuBLAS users pass
 * B with op T). The transpose takes float32, float16 or bfloat16 (X and out alike).
 */
#ifndef SYMCOMM_FUSED_H_
#define SYMCOMM_FUSED_H_

#include "symcomm/symcomm.h"

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

typedef enum {
  symcommFusedAllGatherGemm = 0,
  symcommFusedGemmReduceScatter = 1,
  symcommFusedTransposeAccumulate = 2
} symcommFusedOp_t;

/* The most members a plan's team may have (the length of rows[] and cols[]). */
#define SYMCOMM_FUSED_MAX_MEMBERS 64

typedef struct {
  size_t struct_size; /* sizeof(symcommFusedConfig_t)                                       */
  uint32_t magic;     /* set by symcommFusedConfigInit                                      */
  symcommFusedOp_t op;
  int64_t n;          /* columns of B and C (>= 1); for the transpose, N: the sum of cols[] */
  int64_t k;          /* all-gather + GEMM: columns of A and rows of B (>= 1); not read by
                         the others (GEMM + reduce-scatter's K is the sum of cols[])       */
  /* Per team rank (the first team-size entries; the rest 0): rows of A_r (all-gather +
   * GEMM) or of C_r (GEMM + reduce-scatter), each >= 0, the sum >= 1. Not used by the
   * transpose. */
  int64_t rows[SYMCOMM_FUSED_MAX_MEMBERS];
  /* Per team rank: columns of A_r and rows of B_r (GEMM + reduce-scatter), columns of X_r
   * and out_r (transpose), each >= 0, the sum >= 1. Not used by all-gather + GEMM. */
  int64_t cols[SYMCOMM_FUSED_MAX_MEMBERS];
  symcommDataType_t a_type; /* GEMMs: symcommFloat16 or symcommBfloat16; transpose: X's  */
  symcommDataType_t b_type; /* GEMMs: as a_type; not used by the transpose                 */
  symcommDataType_t c_type; /* GEMMs: float16, bfloat16 or float32; transpose: = a_type   */
  int b_transposed;         /* 1: B is [N, K] row-major (op T)                             */
  int gather_a;             /* all-gather + GEMM: 1 writes the gathered A too              */
  /* An implementation by name (symcommFusedImplementationName), or "" for the first
   * registered one that can implement the plan here. */
  char implementation[32];
} symcommFusedConfig_t;

#define SYMCOMM_FUSED_CONFIG_MAGIC 0x53594655u /* "SYFU" */

/* Defaults: all-gather + GEMM, sizes 0 (to be set), bfloat16 inputs and output, B not
 * transposed, no gathered A, implementation "". */
symcommResult_t symcommFusedConfigInit(symcommFusedConfig_t* config);

typedef struct symcommFusedPlan* symcommFusedPlan_t;

/* The registered implementations' names. */
int symcommFusedImplementationCount(void);
const char* symcommFusedImplementationName(int index);

/* Whether `config` can be implemented over `team` on this rank (the configuration's named
 * implementation, or any): symcommSuccess, or symcommNotSupported with the reason (every
 * implementation's, where none can) in `why` (NUL-terminated, cut at why_bytes; may be NULL)
 * and in symcommGetLastError. symcommInvalidArgument for a configuration that is wrong
 * whatever the implementation (sizes, types, a team of more than SYMCOMM_FUSED_MAX_MEMBERS).
 * Local: nothing is allocated and no peer is asked. */
symcommResult_t symcommFusedCanImplement(symcommComm_t comm, symcommTeam_t team,
                                         const symcommFusedConfig_t* config, char* why,
                                         size_t why_bytes);

/* Collective over the team's members, which pass the same configuration (checked:
 * symcommInvalidUsage otherwise). Fails as symcommFusedCanImplement where it would, on every
 * member alike. */
symcommResult_t symcommFusedPlanCreate(symcommComm_t comm, symcommTeam_t team,
                                       const symcommFusedConfig_t* config,
                                       symcommFusedPlan_t* plan);
/* No run of the plan may still be in flight (synchronise its streams first). */
symcommResult_t symcommFusedPlanDestroy(symcommFusedPlan_t plan);
/* The implementation the plan runs. */
symcommResult_t symcommFusedPlanImplementation(symcommFusedPlan_t plan, const char** name);
/* Bytes of symmetric workspace that symcommFusedRun needs (0: none): allocate them with
 * symcommMalloc (collective), the same size on every member. */
symcommResult_t symcommFusedWorkspaceSize(symcommFusedPlan_t plan, size_t* bytes);

/* Runs the plan on `stream`; collective over the team (every member calls, in the same order
 * as its other collective calls on the team). Buffers, row-major, as the top of this file
 * says: `a` (A_r, or X_r: symmetric for the transpose, which every member reads), `b` (B or
 * B_r; NULL for the transpose), `c` (C, C_r or out_r), `gathered` (all-gather + GEMM with
 * gather_a: [M, K], else NULL), `workspace` (symmetric, at least symcommFusedWorkspaceSize
 * bytes; NULL where that is 0). A buffer may be NULL where this member's part of it is empty.
 * Collective: a run reads the members' inputs only once each of them called it, and returns
 * (in the host space: complete) once no member reads this member's inputs any more, so they
 * may be changed or freed after it (after the stream reaches that point in the cuda space). */
symcommResult_t symcommFusedRun(symcommFusedPlan_t plan, const void* a, const void* b, void* c,
                                void* gathered, void* workspace, symcommStream_t stream);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif

#endif /* SYMCOMM_FUSED_H_ */
