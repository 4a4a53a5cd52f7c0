/*
 * symcomm: collectives on a stream: all-gather, all-to-all(-v), reduce-scatter, all-reduce,
 * broadcast, reduce, gather, scatter, and the registered algorithms that run them. Part of
 * the C host API: symcomm/symcomm.h includes it (and it includes symcomm/symcomm.h), so
 * either may be included.
 */
#ifndef SYMCOMM_COLL_H_
#define SYMCOMM_COLL_H_

#include "symcomm/symcomm.h"

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

/* ------------------------------------------------------------------------------------ */
/* Collectives on a stream                                                              */
/* ------------------------------------------------------------------------------------ */
typedef enum {
  symcommInt8 = 0, symcommUint8 = 1, symcommInt32 = 2, symcommUint32 = 3, symcommInt64 = 4,
  symcommUint64 = 5, symcommFloat16 = 6, symcommBfloat16 = 7, symcommFloat32 = 8,
  symcommFloat64 = 9, symcommFloat8E4M3 = 10, symcommFloat8E5M2 = 11, symcommNumDataTypes = 12
} symcommDataType_t;

/* Reductions. Integers wrap around (two's complement) where a sum or product overflows.
 * 16-bit and 8-bit floats (fp8: e4m3 and e5m2, as CUDA's __nv_fp8_e4m3 and __nv_fp8_e5m2,
 * rounded to nearest and saturated to the largest finite value) are combined in float and
 * rounded once at the end, wherever the algorithm combines them (every algorithm but nccl's,
 * which follows NCCL). symcommAvg is the sum,
 * as the call's algorithm forms it, divided by the team's size: in float for 16-bit floats
 * and float32, in double for float64, with C's integer division (towards zero) for
 * integers. Min and max give the same bits on every algorithm (a NaN is dropped unless both
 * are NaN; -0 is below +0). */
typedef enum {
  symcommSum = 0, symcommMin = 1, symcommMax = 2, symcommProd = 3, symcommAvg = 4,
  symcommNumRedOps = 5
} symcommRedOp_t;

/* A pre-multiplied sum (as NCCL's ncclRedOpCreatePreMulSum; PyTorch's FSDP divides gradients
 * so before summing them): each member's input is multiplied by the scalar, then the products
 * are summed, in the type's arithmetic (16-bit floats in float, rounded once per product and
 * once at the end; integers wrap around). The scalar is one element of `type`: with
 * symcommScalarHost its value is read by this call; with symcommScalarDevice `scalar` is
 * memory of the communicator's space (device memory in the cuda space, any memory in the host
 * space) read when each reduction runs, on its stream, so it may change between calls. The op
 * is a new symcommRedOp_t value (symcommNumRedOps or more) for this communicator's reductions
 * (all-reduce, reduce-scatter, reduce) of `type`, until symcommRedOpDestroy; it is not a
 * collective call, but every member must pass an op with its own scalar to one call. The
 * input is first multiplied into a buffer of the call's own (not symmetric: the choice of
 * algorithm is that of plain buffers). */
typedef enum { symcommScalarDevice = 0, symcommScalarHost = 1 } symcommScalarResidence_t;
symcommResult_t symcommRedOpCreatePreMulSum(symcommRedOp_t* op, const void* scalar,
                                            symcommDataType_t type,
                                            symcommScalarResidence_t residence,
                                            symcommComm_t comm);
symcommResult_t symcommRedOpDestroy(symcommRedOp_t op, symcommComm_t comm);

/* Every collective is called by every member of `team`, in the same order, with the same
 * counts, type, op and root. The members also pass the same kind of buffers: symmetric (the
 * same symcommMalloc object, or the same offset of a symcommRegister registration) on every
 * member, or plain memory on every member; which algorithm runs and whether peers write a
 * receive buffer in place depend on it. SYMCOMM_COLL_CHECK checks all of this at every call
 * with a host round trip (on by default in the host memory space; =1 turns it on in the cuda
 * space too; docs/coll.md).
 *
 * Buffers may be any memory this rank's GPU can read and write (host memory in the host
 * space; checked in the cuda space: pageable host memory and another GPU's memory are
 * symcommInvalidArgument), aligned to the size of `type` (else symcommInvalidArgument).
 * send and recv may be the same buffer where the operation allows it: all-reduce and
 * broadcast (send == recv) and all-gather (send is this rank's block of recv,
 * recv + team_rank * count elements).
 * Symmetric buffers are used in place; others are staged through a symmetric workspace.
 * Counts are in elements.
 *
 * `algorithm` is NULL, "" or "auto" for the automatic choice, or the name of a registered
 * algorithm (symcomm-info and symcommCollAlgorithmName list them). The automatic choice is
 * SYMCOMM_COLL_ALGO's if set (a name, or op=name pairs; "auto" means the table); else the
 * first row of the selection table that matches the call and whose algorithm can run it;
 * else the first registered algorithm that can run it. symcommCollAlgorithm says which.
 *
 * Results of reductions are the same on every member, and between runs bit-identical for a
 * given algorithm, except where an algorithm built on NCCL runs the call (the table may pick
 * it for large all-reduces and reduce-scatters): its floating-point sums follow NCCL's order
 * of combination. */

/* recv (team_size * count) = every member's send (count), in team-rank order. */
symcommResult_t symcommAllGatherOnStream(symcommComm_t comm, symcommTeam_t team, const void* send,
                                         void* recv, size_t count, symcommDataType_t type,
                                         const char* algorithm, symcommStream_t stream);
/* Block j of send (count elements) goes to member j, where it lands as block i (i = the
 * sender's team rank) of recv. */
symcommResult_t symcommAllToAllOnStream(symcommComm_t comm, symcommTeam_t team, const void* send,
                                        void* recv, size_t count, symcommDataType_t type,
                                        const char* algorithm, symcommStream_t stream);
/* All-to-all with counts per member (MPI_Alltoallv): sendcounts[j] elements at element
 * offset sdispls[j] of send go to member j, where they land at element offset rdispls[i] of
 * recv (i = the sender's team rank); recvcounts[i] of member j must equal sendcounts[j] of
 * member i (for its own block, sendcounts[me] == recvcounts[me], checked on every call).
 * Host arrays of team-size entries. The blocks received must not overlap in recv
 * (checked), nor recv and send. A member that receives nothing may pass recv = NULL.
 * Counts that do not pair up between members are an error the call may not detect (it may
 * time out, or move wrong data): SYMCOMM_COLL_CHECK checks them. An algorithm that checks
 * them itself synchronises the stream to do so; the automatic choice passes over it in a
 * CUDA graph capture, and named there it refuses. */
symcommResult_t symcommAllToAllvOnStream(symcommComm_t comm, symcommTeam_t team, const void* send,
                                         const size_t* sendcounts, const size_t* sdispls,
                                         void* recv, const size_t* recvcounts,
                                         const size_t* rdispls, symcommDataType_t type,
                                         const char* algorithm, symcommStream_t stream);
/* All-to-all-v whose counts are in device memory, for routing the host does not know (MoE
 * token dispatch): sendcounts[j] elements at element offset sdispls[j] of send go to member j
 * (device arrays of team-size entries). Every member receives the blocks packed in
 * team-rank order into recv, which holds recv_capacity elements: recvcounts[i] (device,
 * written) is what member i sent here and rdispls[i] (device, written) where its block
 * starts. A block that does not fit in recv_capacity is dropped whole (recvcounts still
 * counts it; compare rdispls[i] + recvcounts[i] with the capacity on the device; where counts
 * are so large that the sum of those before a block wraps around, the block is dropped too). Nothing is
 * read on the host, so it can be captured in a CUDA graph. It runs in both memory spaces,
 * with the same results (in the host space all memory is the host's, so that programs and
 * their tests run in CI). The four arrays must be memory the GPU can
 * access (checked: not pageable host memory, not another GPU's), 8-byte aligned, apart
 * from recv, and recvcounts and rdispls apart from each other and from the other two
 * (checked: the call writes them); apart from send too. Not checked, since the counts are only on
 * the device: that send holds sdispls[j] + sendcounts[j] elements and that those blocks do
 * not overlap recv; such errors corrupt memory as they would in a kernel of the caller's. */
symcommResult_t symcommAllToAllvDeviceOnStream(symcommComm_t comm, symcommTeam_t team,
                                               const void* send, const size_t* sendcounts,
                                               const size_t* sdispls, void* recv,
                                               size_t recv_capacity, size_t* recvcounts,
                                               size_t* rdispls, symcommDataType_t type,
                                               const char* algorithm, symcommStream_t stream);
/* recv (recvcount) of member j = op over members of block j of their send
 * (team_size * recvcount). */
symcommResult_t symcommReduceScatterOnStream(symcommComm_t comm, symcommTeam_t team,
                                             const void* send, void* recv, size_t recvcount,
                                             symcommDataType_t type, symcommRedOp_t op,
                                             const char* algorithm, symcommStream_t stream);
/* recv (count) = op over members of their send (count), on every member. */
symcommResult_t symcommAllReduceOnStream(symcommComm_t comm, symcommTeam_t team, const void* send,
                                         void* recv, size_t count, symcommDataType_t type,
                                         symcommRedOp_t op, const char* algorithm,
                                         symcommStream_t stream);
/* recv (count) of every member = send of member `root` (a team rank). send is read on the
 * root only, and may be any memory the root's GPU reads: the kind of buffers the members
 * must agree on is recv's. */
symcommResult_t symcommBroadcastOnStream(symcommComm_t comm, symcommTeam_t team, const void* send,
                                         void* recv, size_t count, symcommDataType_t type,
                                         int root, const char* algorithm, symcommStream_t stream);
/* Reduce, gather and scatter take a `root` (a team rank, the same on every member). Their
 * buffers need not be of one kind on every member (symmetric on some, plain on others): each
 * member's are its own. */
/* recv (count) of member `root` = op over members of their send (count). recv is written on
 * the root only (the others may pass NULL); send == recv is allowed there. */
symcommResult_t symcommReduceOnStream(symcommComm_t comm, symcommTeam_t team, const void* send,
                                      void* recv, size_t count, symcommDataType_t type,
                                      symcommRedOp_t op, int root, const char* algorithm,
                                      symcommStream_t stream);
/* recv (team_size * count) of member `root` = every member's send (count), in team-rank
 * order. recv is written on the root only (the others may pass NULL); it must not overlap
 * send. */
symcommResult_t symcommGatherOnStream(symcommComm_t comm, symcommTeam_t team, const void* send,
                                      void* recv, size_t count, symcommDataType_t type,
                                      int root, const char* algorithm, symcommStream_t stream);
/* recv (count) of member j = block j (count elements) of the root's send (team_size *
 * count). send is read on the root only (the others may pass NULL); it must not overlap
 * recv. */
symcommResult_t symcommScatterOnStream(symcommComm_t comm, symcommTeam_t team, const void* send,
                                       void* recv, size_t count, symcommDataType_t type,
                                       int root, const char* algorithm, symcommStream_t stream);
/* Two-sided calls. symcommSendOnStream sends count elements of `send` to member `peer` of
 * `team` (a team rank); symcommRecvOnStream receives count elements from member `peer` into
 * `recv`. Buffers may be any memory of the space (symmetric or not): the message goes through
 * mailboxes in every rank's heap (SYMCOMM_P2P_SLOT bytes a slot, 4 slots a peer). Sends and
 * receives between two ranks are matched in the order of their calls, whatever the team: the
 * n-th send from rank a to rank b meets the n-th receive at b from a, and must have the same
 * size and team (else the receive fails with symcommInvalidArgument naming both, after taking
 * the message out of the way, so the next pair still matches). A call may send to or receive
 * from this rank itself.
 *
 * The host space (stream NULL): outside a group a call returns once its message is out of
 * this rank's buffer (a send: every chunk is in the receiver's mailbox) or in it (a receive);
 * a send longer than 4 slots waits for its receiver to take chunks, so two ranks that both send
 * before they receive need a group. The cuda space: a group (or a call outside one) is one
 * kernel on `stream`, enqueued at once; buffers are memory the GPU reaches; a mismatched
 * receive writes nothing and the communicator's next send or receive reports it; a group
 * holds at most 72 calls, of one communicator (symcommNotSupported beyond). */
symcommResult_t symcommSendOnStream(symcommComm_t comm, symcommTeam_t team, const void* send,
                                    size_t count, symcommDataType_t type, int peer,
                                    symcommStream_t stream);
symcommResult_t symcommRecvOnStream(symcommComm_t comm, symcommTeam_t team, void* recv,
                                    size_t count, symcommDataType_t type, int peer,
                                    symcommStream_t stream);
/* Groups, per calling thread: the sends and receives called between symcommGroupStart and its
 * symcommGroupEnd (of any communicators) are only checked and queued; symcommGroupEnd runs
 * them all at once, so that a ring of sends and receives, or an all-to-all-v written with
 * them, cannot deadlock. The collectives called in a group (all of this header's but the
 * barrier) are queued too, their communicator checked at the call and the rest when they run:
 * symcommGroupEnd runs them first, ordered by communicator (the same order on every rank,
 * whatever order each rank called them in) and by call within one, then the sends and
 * receives. Buffers (and an all-to-all-v's host count arrays, which are copied, aside) must
 * stay valid until then. Groups nest: the outermost symcommGroupEnd runs the calls. Other
 * calls inside a group (one-sided, barriers) run at once, as outside. symcommGroupEnd without
 * a symcommGroupStart is symcommInvalidUsage; where a queued call fails, symcommGroupEnd
 * reports the first failure, the group is over, and the calls that had not finished are not
 * resumed. */
symcommResult_t symcommGroupStart(void);
symcommResult_t symcommGroupEnd(void);
/* The collectives, for symcommCollAlgorithm. */
typedef enum {
  symcommCollAllGather = 0, symcommCollAllToAll = 1, symcommCollAllToAllv = 2,
  symcommCollReduceScatter = 3, symcommCollAllReduce = 4, symcommCollBroadcast = 5,
  symcommCollReduce = 6, symcommCollGather = 7, symcommCollScatter = 8
} symcommCollOp_t;
/* The algorithm (static storage) that a call of `op` over `team` with algorithm NULL or
 * "auto" and on a stream not being captured would run, as chosen now: SYMCOMM_COLL_ALGO's
 * choice if set (an error if it cannot run the call), else the selection table's (the first
 * matching row whose algorithm can run it), else the first registered algorithm that can.
 * `count` and `type` as the call takes them (all-to-all-v: the elements this rank sends in
 * all, counts on the host); `symmetric` (non-zero): the call's buffers are symmetric or
 * registered, else plain memory.
 * Local: no communication. */
symcommResult_t symcommCollAlgorithm(symcommComm_t comm, symcommTeam_t team, symcommCollOp_t op,
                                     size_t count, symcommDataType_t type, int symmetric,
                                     const char** name);
/* The registered collective algorithms, in the order the automatic choice prefers them
 * (index 0 to count - 1): their names ("copy", ...; NULL past the end), and what each
 * declares it can do. */
int symcommCollAlgorithmCount(void);
const char* symcommCollAlgorithmName(int index);
typedef struct {
  const char* name;         /* the calls' `algorithm` argument (static storage, as below)   */
  const char* summary;      /* how it works, in a few words                                 */
  unsigned ops;             /* 1u << op for each symcommCollOp_t it does                    */
  unsigned spaces;          /* 1u << space for each symcommMemorySpace_t it runs in         */
  unsigned device_counts;   /* 1u << space for each it does AllToAllvDeviceOnStream in      */
  unsigned uncapturable_ops; /* ops it refuses on a stream being captured into a CUDA graph */
  int max_team;             /* the most members of a team it runs on; 0: any                */
  int in_place_recv;        /* receive buffers must be symmetric or registered              */
  int load_store;           /* every member must be symcommPeerAccessible from every other  */
  int counters;             /* keeps counters with its peers: after one of its waits failed
                               (symcommTimeout) it refuses every call on the communicator   */
  const char* library;      /* a library loaded at run time, without which (or where it
                               cannot serve the ranks) it refuses every call; NULL: none    */
  int across_nodes;         /* runs only on teams that span two or more nodes with as many
                               members on each (teams of one node: the node's algorithms)   */
} symcommCollAlgorithmInfo_t;
/* What algorithm `index` declares: a call it refuses breaks one of these conditions, or one
 * of its own (symcommCollAlgorithmCanRun says which). symcommInvalidArgument past the end. */
symcommResult_t symcommGetCollAlgorithmInfo(int index, symcommCollAlgorithmInfo_t* info);
/* Whether the registered algorithm named `algorithm` can run a call of `op` over `team`
 * (arguments as symcommCollAlgorithm takes them; on a stream not being captured):
 * symcommSuccess, or symcommNotSupported with symcommGetLastError() saying why, as the call
 * would. symcommInvalidArgument where `algorithm` names no registered algorithm. Local: no
 * communication; the answer is every member's. */
symcommResult_t symcommCollAlgorithmCanRun(symcommComm_t comm, symcommTeam_t team,
                                           symcommCollOp_t op, size_t count,
                                           symcommDataType_t type, int symmetric,
                                           const char* algorithm);
/* The selection table as text, a row per line (static storage). */
const char* symcommCollSelectionTable(void);

#pragma GCC visibility pop
#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SYMCOMM_COLL_H_ */
