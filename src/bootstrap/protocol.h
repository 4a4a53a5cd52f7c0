// Messages of the bootstrap network. Ranks join through the root (a thread started by
// symcommGetUniqueId, or by rank 0 when joining from a launcher's environment), which
// hands every rank the table of PeerInfo; then ranks 1..n-1 connect twice to rank 0 (the
// hub): a data connection for the host-side collectives and a liveness connection on which
// the monitor threads exchange heartbeats and peer-lost notices.
#pragma once

#include <cstdint>

#include "bootstrap/socket.h"

namespace symcomm {

constexpr uint32_t kJoinMagic = 0x53434a4e;   // "SCJN"
constexpr uint32_t kHubMagic = 0x53434842;    // "SCHB"
constexpr uint32_t kMsgMagic = 0x53434d47;    // "SCMG"
constexpr uint32_t kP2pMagic = 0x53435032;    // "SCP2"

// What each rank tells the others when it joins.
struct PeerInfo {
  char hostname[64];
  char boot_id[40];  // /proc/sys/kernel/random/boot_id: tells two nodes of one name apart
  int32_t pid;
  int32_t rank;
  NetAddr hub;       // rank 0's hub listener; unused for other ranks
  NetAddr p2p;       // this rank's listener for point-to-point messages (Bootstrap::send_to)
};

struct JoinHello {
  uint32_t magic;
  uint8_t token[16];
  int32_t nranks;
  int32_t rank;
  PeerInfo info;
};

// The root's answer. On success, nranks PeerInfo follow.
struct JoinReply {
  uint32_t magic;
  int32_t status;  // symcommResult_t
  uint64_t comm_id;
  char message[512];
};

enum class Channel : int32_t { Data = 0, Liveness = 1 };

struct HubHello {
  uint32_t magic;
  uint8_t token[16];
  uint64_t comm_id;
  int32_t rank;
  Channel channel;
};

// Result and Error answer a collective; Broken answers it with an error that ends the host
// collectives of the communicator for good (a rank timed out, or the ranks fell out of step):
// every later collective fails on every rank, so that no rank pairs a call with another
// rank's different one. Abandon: a rank that gave up waiting for rank 0's answer tells it so.
enum class Op : uint32_t {
  Allgather = 1, Broadcast = 2, Barrier = 3, Result = 4, Error = 5, Broken = 6, Abandon = 7
};

// Header of every message on a data connection; `bytes` of payload follow.
struct MsgHeader {
  uint32_t magic;
  Op op;
  uint64_t seq;   // the collective's sequence number: catches ranks out of step
  int64_t arg;    // Broadcast: the root; Error: a symcommResult_t
  uint64_t bytes;
};

// A point-to-point message: one connection to the receiver's p2p listener per message,
// this header, then `bytes` of payload.
struct P2pHeader {
  uint32_t magic;
  int32_t from;
  uint8_t token[16];
  uint64_t comm_id;
  uint64_t tag;
  uint64_t bytes;
};

// The most payload a receiver takes from a message whose size it cannot know from its own
// call: a point-to-point message, rank 0's error answer, or a collective's message that does
// not match rank 0's call (read and dropped so that the disagreement can be reported). A
// header announcing more is a protocol error: it comes from a corrupt stream or from a
// process that is not this symcomm, and allocating what it asks for could exhaust memory.
constexpr uint64_t kMaxUnexpectedBytes = uint64_t{64} << 20;

// Bytes on a liveness connection.
constexpr char kHeartbeat = 'H';
constexpr char kPeerLost = 'L';  // followed by int32 rank (hub to others)
// A rank that leaves on purpose (failed initialization agreed by all, finalize) says so
// before closing, so that the hub does not report its closed connection as a lost peer.
constexpr char kLeaving = 'G';

}  // namespace symcomm
