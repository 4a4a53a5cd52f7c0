// Joining communicators: by unique id, from launchers' environments, the root's token
// check, disagreements and timeouts, argument checks; and the bootstrap collectives.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mp.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(Init, WorldDescribesItself) {
  int rank, size, local, local_size, node, nnodes, device;
  symcommMemorySpace_t space;
  SC_OK(symcommCommRank(mp::world(), &rank));
  SC_OK(symcommCommSize(mp::world(), &size));
  SC_OK(symcommCommLocalRank(mp::world(), &local));
  SC_OK(symcommCommLocalSize(mp::world(), &local_size));
  SC_OK(symcommCommNode(mp::world(), &node, &nnodes));
  SC_OK(symcommCommMemorySpace(mp::world(), &space));
  SC_OK(symcommCommDevice(mp::world(), &device));
  EXPECT_EQ(rank, atoi(getenv("SYMCOMM_RANK")));
  EXPECT_EQ(size, atoi(getenv("SYMCOMM_NRANKS")));
  // symrun starts every rank on this machine, as one node or (--nodes) as nodes of
  // consecutive ranks named apart, which it tells each rank in SYMCOMM_LOCAL_SIZE.
  const int per_node = atoi(getenv("SYMCOMM_LOCAL_SIZE"));
  EXPECT_EQ(local, rank % per_node);
  EXPECT_EQ(local_size, per_node);
  EXPECT_EQ(node, rank / per_node);
  EXPECT_EQ(nnodes, size / per_node);
  EXPECT_EQ(space, mp::space());
  if (space == symcommSpaceHost) EXPECT_EQ(device, -1);
  else EXPECT_GE(device, 0);
  for (int pe = 0; pe < size; ++pe) {
    int ok = -1;
    SC_OK(symcommPeerAccessible(mp::world(), pe, &ok));
    EXPECT_EQ(ok, pe / per_node == node ? 1 : 0) << "pe " << pe;
  }
}

TEST(Init, JoinByUniqueIdTwice) {
  for (int i = 0; i < 2; ++i) {
    symcommComm_t comm = mp::new_comm();
    ASSERT_NE(comm, nullptr);
    int rank = -1, size = -1;
    SC_OK(symcommCommRank(comm, &rank));
    SC_OK(symcommCommSize(comm, &size));
    EXPECT_EQ(rank, mp::rank());
    EXPECT_EQ(size, mp::nranks());
    SC_OK(symcommFinalize(comm));
  }
}

TEST(Init, RootRefusesWrongToken) {
  symcommUniqueId good = mp::shared_uid();
  symcommUniqueId bad = good;
  // The token follows the magic, version (4 bytes each) and the root's address (20 bytes).
  for (size_t i = 28; i < 44; ++i) bad.internal[i] ^= 0x5a;
  ASSERT_NE(std::memcmp(&bad, &good, sizeof good), 0);
  symcommComm_t comm = nullptr;
  symcommConfig_t cfg = mp::config();
  symcommResult_t rc = symcommInit(&comm, mp::nranks(), mp::rank(), &bad, &cfg);
  EXPECT_EQ(rc, symcommInvalidArgument) << symcommGetLastError();
  EXPECT_NE(std::strstr(symcommGetLastError(), "wrong token"), nullptr) << symcommGetLastError();
  EXPECT_EQ(comm, nullptr);
  // The root refused those connections and still serves the genuine ranks.
  SC_OK(symcommInit(&comm, mp::nranks(), mp::rank(), &good, &cfg));
  SC_OK(symcommFinalize(comm));
}

TEST(Init, RanksDisagreeOnSize) {
  symcommUniqueId uid = mp::shared_uid();
  symcommComm_t comm = nullptr;
  symcommConfig_t cfg = mp::config();
  int n = mp::rank() == 0 ? mp::nranks() + 1 : mp::nranks();
  mp::ScopedEnv timeout("SYMCOMM_BOOTSTRAP_TIMEOUT", "10");
  symcommResult_t rc = symcommInit(&comm, n, mp::rank(), &uid, &cfg);
  // The root fails everyone once it sees the second, different size.
  EXPECT_EQ(rc, symcommInvalidArgument) << symcommGetLastError();
  EXPECT_NE(std::strstr(symcommGetLastError(), "disagree on nranks"), nullptr)
      << symcommGetLastError();
}

TEST(Init, MissingRankTimesOut) {
  mp::ScopedEnv timeout("SYMCOMM_BOOTSTRAP_TIMEOUT", "2");
  symcommUniqueId uid = mp::shared_uid();  // the root starts with the short timeout
  symcommComm_t comm = nullptr;
  symcommConfig_t cfg = mp::config();
  auto start = Clock::now();
  // One more rank than will ever join.
  symcommResult_t rc = symcommInit(&comm, mp::nranks() + 1, mp::rank(), &uid, &cfg);
  double took = seconds_since(start);
  EXPECT_EQ(rc, symcommTimeout) << symcommGetLastError();
  EXPECT_NE(std::strstr(symcommGetLastError(), "did not join"), nullptr) << symcommGetLastError();
  EXPECT_GE(took, 0.9 * 2.0) << "the join ended before SYMCOMM_BOOTSTRAP_TIMEOUT";
  EXPECT_LT(took, 12.0);  // the bound, the answer's 2 s, and room for a loaded machine
  EXPECT_EQ(comm, nullptr);
}

TEST(Init, BadArguments) {
  symcommUniqueId uid{};
  symcommComm_t comm = nullptr;
  SC_FAILS(symcommInit(nullptr, 2, 0, &uid, nullptr), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "comm is NULL"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommInit(&comm, 0, 0, &uid, nullptr), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "nranks is 0"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommInit(&comm, 2, 2, &uid, nullptr), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "rank 2 is out of range"), nullptr);
  SC_FAILS(symcommInit(&comm, 2, -1, &uid, nullptr), symcommInvalidArgument);
  SC_FAILS(symcommInit(&comm, 2, 0, nullptr, nullptr), symcommInvalidArgument);
  SC_FAILS(symcommInit(&comm, 2, 0, &uid, nullptr), symcommInvalidArgument);  // zeros: no magic
  EXPECT_NE(std::strstr(symcommGetLastError(), "not a symcomm unique id"), nullptr);
  symcommConfig_t cfg{};
  SC_FAILS(symcommInit(&comm, 2, 0, &uid, &cfg), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "symcommConfigInit"), nullptr);
  SC_OK(symcommConfigInit(&cfg));
  cfg.struct_size = 8;
  SC_FAILS(symcommInit(&comm, 2, 0, &uid, &cfg), symcommInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  SC_FAILS(symcommFinalize(nullptr), symcommInvalidArgument);
  SC_FAILS(symcommCommRank(mp::world(), nullptr), symcommInvalidArgument);
  int ok;
  SC_FAILS(symcommPeerAccessible(mp::world(), mp::nranks(), &ok), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "symcommPeerAccessible(pe="), nullptr);
}

TEST(Init, UniqueIdText) {
  symcommUniqueId uid = mp::shared_uid(), back{};
  char text[SYMCOMM_UNIQUE_ID_STRING_BYTES];
  SC_OK(symcommUniqueIdToString(&uid, text, sizeof text));
  EXPECT_EQ(std::strlen(text), 2u * SYMCOMM_UNIQUE_ID_BYTES);
  SC_OK(symcommUniqueIdFromString(text, &back));
  EXPECT_EQ(std::memcmp(&uid, &back, sizeof uid), 0);
  SC_FAILS(symcommUniqueIdToString(&uid, text, sizeof text - 1), symcommInvalidArgument);
  text[5] = 'x';
  SC_FAILS(symcommUniqueIdFromString(text, &back), symcommInvalidArgument);
  SC_FAILS(symcommUniqueIdFromString("abc", &back), symcommInvalidArgument);
  // Consume the id so that its root thread finishes.
  symcommComm_t comm;
  symcommConfig_t cfg = mp::config();
  SC_OK(symcommInit(&comm, mp::nranks(), mp::rank(), &uid, &cfg));
  SC_OK(symcommFinalize(comm));
}

// A free TCP port on loopback, chosen by rank 0 and shared.
int free_port() {
  int port = 0;
  if (mp::rank() == 0) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    close(fd);
  }
  return static_cast<int>(mp::agree(static_cast<uint64_t>(port)));
}

// Hides, while alive, the variables symrun gives each rank: its own, and torchrun's names
// that it sets beside them (which would otherwise be found before other launchers').
std::vector<std::unique_ptr<mp::ScopedEnv>> hide_symrun() {
  std::vector<std::unique_ptr<mp::ScopedEnv>> hidden;
  for (const char* name : {"SYMCOMM_RANK", "SYMCOMM_NRANKS", "SYMCOMM_UNIQUE_ID", "RANK",
                           "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                           "MASTER_PORT"})
    hidden.push_back(std::make_unique<mp::ScopedEnv>(name, ""));
  return hidden;
}

// Joins from a launcher's variables with symrun's hidden for the duration.
void join_from(const std::vector<std::pair<const char*, std::string>>& vars) {
  const auto hidden = hide_symrun();
  std::vector<std::unique_ptr<mp::ScopedEnv>> set;
  for (const auto& [name, value] : vars) set.push_back(std::make_unique<mp::ScopedEnv>(name, value));
  symcommComm_t comm = nullptr;
  symcommConfig_t cfg = mp::config();
  SC_OK(symcommInitFromEnv(&comm, &cfg));
  int rank = -1, size = -1;
  SC_OK(symcommCommRank(comm, &rank));
  SC_OK(symcommCommSize(comm, &size));
  EXPECT_EQ(rank, mp::rank());
  EXPECT_EQ(size, mp::nranks());
  SC_OK(symcommHostBarrier(comm));
  SC_OK(symcommFinalize(comm));
}

TEST(InitFromEnv, Torchrun) {
  int port = free_port() - 1;  // the root listens on MASTER_PORT + 1
  join_from({{"RANK", std::to_string(mp::rank())},
             {"WORLD_SIZE", std::to_string(mp::nranks())},
             {"LOCAL_RANK", std::to_string(mp::rank())},
             {"MASTER_ADDR", "127.0.0.1"},
             {"MASTER_PORT", std::to_string(port)}});
}

TEST(InitFromEnv, OpenMpiWithRootAddress) {
  join_from({{"OMPI_COMM_WORLD_RANK", std::to_string(mp::rank())},
             {"OMPI_COMM_WORLD_SIZE", std::to_string(mp::nranks())},
             {"SYMCOMM_BOOTSTRAP_ROOT", "127.0.0.1:" + std::to_string(free_port())}});
}

TEST(InitFromEnv, SlurmWithToken) {
  join_from({{"SLURM_PROCID", std::to_string(mp::rank())},
             {"SLURM_NTASKS", std::to_string(mp::nranks())},
             {"SYMCOMM_BOOTSTRAP_TOKEN", "00112233445566778899aabbccddeeff"},
             {"SYMCOMM_BOOTSTRAP_ROOT", "localhost:" + std::to_string(free_port())}});
}

TEST(InitFromEnv, ExplainsWhatIsMissing) {
  const auto hidden = hide_symrun();
  symcommComm_t comm = nullptr;
  SC_FAILS(symcommInitFromEnv(&comm, nullptr), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "no launcher environment"), nullptr)
      << symcommGetLastError();
  mp::ScopedEnv r("PMI_RANK", "0"), s("PMI_SIZE", "2");
  SC_FAILS(symcommInitFromEnv(&comm, nullptr), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "MASTER_ADDR"), nullptr) << symcommGetLastError();
  mp::ScopedEnv t("PMI_SIZE", "x");
  SC_FAILS(symcommInitFromEnv(&comm, nullptr), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "PMI_SIZE='x'"), nullptr) << symcommGetLastError();
}

TEST(HostCollectives, AllgatherSizes) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{(1 << 20) + 3}}) {
    std::vector<uint8_t> mine(bytes), all(bytes * static_cast<size_t>(mp::nranks()), 0xee);
    for (size_t i = 0; i < bytes; ++i) mine[i] = mp::pattern(mp::rank(), bytes, i);
    SC_OK(symcommHostAllgather(mp::world(), mine.data(), all.data(), bytes));
    for (int r = 0; r < mp::nranks(); ++r) {
      size_t bad = 0;
      for (size_t i = 0; i < bytes; ++i)
        bad += all[static_cast<size_t>(r) * bytes + i] != mp::pattern(r, bytes, i);
      EXPECT_EQ(bad, 0u) << "bytes " << bytes << " from rank " << r;
    }
  }
}

TEST(HostCollectives, BroadcastFromEveryRoot) {
  for (int root = 0; root < mp::nranks(); ++root) {
    for (size_t bytes : {size_t{1}, size_t{1000}, size_t{300000}}) {
      std::vector<uint8_t> buf(bytes, 0xee);
      if (mp::rank() == root)
        for (size_t i = 0; i < bytes; ++i) buf[i] = mp::pattern(root, 7, i);
      SC_OK(symcommHostBroadcast(mp::world(), buf.data(), bytes, root));
      size_t bad = 0;
      for (size_t i = 0; i < bytes; ++i) bad += buf[i] != mp::pattern(root, 7, i);
      EXPECT_EQ(bad, 0u) << "root " << root << " bytes " << bytes;
    }
  }
}

// 200 barriers, each of which must hold every rank until all have arrived. Before each
// barrier every rank puts a value of that round into its slot of every rank's symmetric
// area; after it, every rank reads all the slots of its own: a barrier that lets a rank
// through early shows as a value of an earlier round. One rank in turn arrives late each
// round (it sleeps before its puts), so a barrier that does not wait fails every round, not
// by chance. The rounds alternate between two areas, so one barrier a round suffices:
// round r + 1 writes the other area, and round r + 2 writes this one only after barrier
// r + 1, which every rank reaches only after its reads of round r.
TEST(HostCollectives, RepeatedBarriers) {
  const int n = mp::nranks(), me = mp::rank();
  const size_t area = static_cast<size_t>(n) * sizeof(uint64_t);
  uint64_t* sym = nullptr;
  SC_OK(symcommMalloc(mp::world(), 2 * area, reinterpret_cast<void**>(&sym)));
  const std::vector<uint64_t> zeros(2 * static_cast<size_t>(n), 0);
  mp::copy_from_host(sym, zeros.data(), 2 * area);
  symcommStream_t stream = mp::new_stream();
  SC_OK(symcommHostBarrier(mp::world()));  // every area is cleared before any put
  auto value = [](int round, int who) {
    return (static_cast<uint64_t>(round) + 1) << 32 | static_cast<uint64_t>(who);
  };
  int bad_rounds = 0;
  std::string first_bad;
  std::vector<uint64_t> seen(static_cast<size_t>(n));
  for (int round = 0; round < 200; ++round) {
    uint64_t* slots = sym + static_cast<size_t>(round % 2) * static_cast<size_t>(n);
    if (round % n == me) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const uint64_t mine = value(round, me);
    for (int pe = 0; pe < n; ++pe)
      SC_OK(symcommPutOnStream(mp::world(), slots + me, &mine, sizeof mine, pe,
                               symcommEngineAuto, stream));
    mp::sync(stream);
    SC_OK(symcommHostBarrier(mp::world()));
    mp::copy_to_host(seen.data(), slots, area);
    for (int pe = 0; pe < n; ++pe) {
      if (seen[static_cast<size_t>(pe)] == value(round, pe)) continue;
      if (bad_rounds++ == 0)
        first_bad = "round " + std::to_string(round) + ": rank " + std::to_string(pe) +
                    "'s slot holds " + std::to_string(seen[static_cast<size_t>(pe)]) +
                    " after the barrier, not " + std::to_string(value(round, pe));
      break;
    }
  }
  EXPECT_EQ(bad_rounds, 0) << first_bad;
  mp::free_stream(stream);
  SC_OK(symcommFree(mp::world(), sym));
}

// A rank that skips a host collective makes the others' call time out; from then on every
// rank fails alike, and no rank pairs its next call with another rank's different one (the
// late rank's skipped call with the others' next). SYMCOMM_BOOTSTRAP_TIMEOUT is read at each
// collective: 1 s for the communicator under test only, not for the world's barrier between.
void skipped_host_barrier(int late) {
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  const std::string who = std::to_string(late);
  {
    mp::ScopedEnv bound("SYMCOMM_BOOTSTRAP_TIMEOUT", "1");
    if (mp::rank() != late) {
      SC_FAILS(symcommHostBarrier(comm), symcommTimeout);
      if (late != 0) {  // rank 0 says which rank did not come
        EXPECT_NE(std::strstr(symcommGetLastError(), ("rank " + who + " did not arrive").c_str()),
                  nullptr) << symcommGetLastError();
      }
    }
  }
  SC_OK(symcommHostBarrier(mp::world()));  // the late rank comes once the others gave up
  {
    mp::ScopedEnv bound("SYMCOMM_BOOTSTRAP_TIMEOUT", "1");
    // The late rank's call is the one the others gave up: it fails too, and so does every
    // later collective on every rank, at once.
    const auto start = std::chrono::steady_clock::now();
    SC_FAILS(symcommHostBarrier(comm), symcommTimeout);
    if (mp::rank() == late) {
      EXPECT_NE(std::strstr(symcommGetLastError(), late == 0 ? "gave up" : "did not arrive"),
                nullptr) << symcommGetLastError();
    }
    uint64_t mine = 1, all[64];
    SC_FAILS(symcommHostAllgather(comm, &mine, all, sizeof mine), symcommTimeout);
    EXPECT_NE(std::strstr(symcommGetLastError(), "ended there on every rank"), nullptr)
        << symcommGetLastError();
    SC_FAILS(symcommHostBarrier(comm), symcommTimeout);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30);
  }
  // Every rank is past its failed calls before any finalizes: a finalize that cannot meet
  // the others leaves at once, and a rank that had not yet made its calls would see it go
  // (symcommPeerLost) before it learned that the host collectives ended.
  SC_OK(symcommHostBarrier(mp::world()));
  // Finalize frees all the same and reports it on every rank, not "out of step".
  SC_FAILS(symcommFinalize(comm), symcommTimeout);
  EXPECT_EQ(std::strstr(symcommGetLastError(), "out of step"), nullptr) << symcommGetLastError();
  SC_OK(symcommHostBarrier(mp::world()));
}

TEST(HostCollectives, ARankThatSkipsABarrierFailsEveryRankAlike) {
  if (mp::nranks() < 2) GTEST_SKIP() << "needs two ranks";
  skipped_host_barrier(0);                 // the hub (rank 0) comes late
  skipped_host_barrier(mp::nranks() - 1);  // another rank comes late
}

TEST(HostCollectives, DisagreementsFailOnEveryRank) {
  uint64_t buf[4] = {};
  std::vector<uint64_t> all(4 * static_cast<size_t>(mp::nranks()));
  size_t bytes = mp::rank() == mp::nranks() - 1 ? 16 : 8;
  SC_FAILS(symcommHostAllgather(mp::world(), buf, all.data(), bytes), symcommInvalidUsage);
  EXPECT_NE(std::strstr(symcommGetLastError(), "disagree on the allgather size"), nullptr);
  // Rank 0 names a root out of range: its own mistake is an invalid argument, with the place
  // in the library that found it, as the stream broadcast says it; the others learn that
  // rank 0 refused (symcommInvalidUsage, as SYMCOMM_COLL_CHECK reports a member's refusal).
  int root = mp::rank() == 0 ? mp::nranks() : 0;
  SC_FAILS(symcommHostBroadcast(mp::world(), buf, 8, root),
           mp::rank() == 0 ? symcommInvalidArgument : symcommInvalidUsage);
  EXPECT_NE(std::strstr(symcommGetLastError(), "out of range"), nullptr) << symcommGetLastError();
  if (mp::rank() == 0) {
    EXPECT_NE(std::strstr(symcommGetLastError(), ".cc:"), nullptr) << symcommGetLastError();
  }
  SC_FAILS(symcommHostBroadcast(mp::world(), buf, 8, -1), symcommInvalidArgument);  // everyone
  EXPECT_NE(std::strstr(symcommGetLastError(), "root -1 is out of range"), nullptr)
      << symcommGetLastError();
  // The world is still usable.
  SC_OK(symcommHostBarrier(mp::world()));
}

}  // namespace

// A finalized handle stays known as finalized, also once a newer communicator exists: the
// allocator may put the newer one at the same address, and a stale handle that is not known
// as finalized would then drive it (finalize it, here).
TEST(Init, AFinalizedHandleNeverDrivesANewerCommunicator) {
  symcommComm_t a = mp::new_comm();
  ASSERT_NE(a, nullptr);
  SC_OK(symcommFinalize(a));
  symcommComm_t b = mp::new_comm();
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  SC_FAILS_SAYING(symcommFinalize(a), symcommInvalidArgument, "not a live communicator");
  int size = 0;
  SC_FAILS(symcommCommSize(a, &size), symcommInvalidArgument);
  SC_OK(symcommCommSize(b, &size));
  EXPECT_EQ(size, mp::nranks());
  SC_OK(symcommHostBarrier(b));
  SC_OK(symcommFinalize(b));
}

// Sizes beyond the host collectives' limit (1 GiB in all) are refused alike on every rank
// that passes them, before anything is sent: the communicator stays in step (not 2^61 bytes
// failing to allocate on one rank while the others go on into the round, or SIZE_MAX
// reported as an internal error).
TEST(HostCollectives, SizesBeyondTheLimitAreRefusedInStep) {
  uint64_t buf[2] = {};
  for (size_t bytes : {size_t{1} << 61, SIZE_MAX, (size_t{1} << 30) + 1}) {
    SC_FAILS_SAYING(symcommHostBroadcast(mp::world(), buf, bytes, 0), symcommInvalidArgument,
                    "limit");
    SC_FAILS_SAYING(symcommHostAllgather(mp::world(), buf, buf, bytes), symcommInvalidArgument,
                    "limit");
  }
  // Per rank, an allgather's limit is 1 GiB / nranks.
  SC_FAILS_SAYING(symcommHostAllgather(mp::world(), buf, buf,
                                       (size_t{1} << 30) / static_cast<size_t>(mp::nranks()) + 1),
                  symcommInvalidArgument, "limit");
  // In step: the next collectives pair up as they should.
  buf[0] = 42 + static_cast<uint64_t>(mp::rank());
  SC_OK(symcommHostBroadcast(mp::world(), buf, 8, 0));
  EXPECT_EQ(buf[0], 42u);
  SC_OK(symcommHostBarrier(mp::world()));
}

namespace {

// Joins a communicator under `peer_timeout` and `heartbeat`, stays quiet for `quiet_s`, and
// checks that no peer was taken for lost: a host barrier still passes. The bounds leave a
// second or more of room: a monitor thread on a loaded machine may wait that long for a core.
void quiet_peers_stay(const char* peer_timeout, const char* heartbeat, double quiet_s) {
  mp::ScopedEnv t("SYMCOMM_PEER_TIMEOUT", peer_timeout);
  mp::ScopedEnv h("SYMCOMM_HEARTBEAT_INTERVAL", heartbeat);
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  std::this_thread::sleep_for(std::chrono::duration<double>(quiet_s));
  EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
  SC_OK(symcommFinalize(comm));
}

// 0 turns the silence bound off; read as a bound, it would declare every peer lost at the
// first look.
TEST(PeerTimeout, ZeroMeansSilenceIsNoLoss) { quiet_peers_stay("0", "1", 0.5); }

// Heartbeats rarer than the timeout are sent every half timeout instead; as given, they
// would let every live peer pass for lost (beats every 20 s against a 3 s timeout: lost at
// 3 s).
TEST(PeerTimeout, AHeartbeatLongerThanTheTimeoutIsShortened) {
  quiet_peers_stay("3", "20", 4.5);
}

// Heartbeats far more often than the monitor's 100 ms wake-up: a monitor that wakes every
// 100 ms whatever the interval sends the beats late. A quiet second longer than
// the timeout shows that live peers stay; a timeout short enough to show the late beats
// themselves (tens of milliseconds) would also lose peers to a loaded machine's scheduling.
TEST(PeerTimeout, AShortTimeoutKeepsLivePeers) { quiet_peers_stay("2", "0.02", 3.0); }

}  // namespace

// Without SYMCOMM_BOOTSTRAP_ADDR, rank 0's root listens on every address on the root's port:
// MASTER_ADDR may name rank 0's host by an address it does not resolve to there (a host name
// that maps to 127.0.1.1 on its own host, and to its network address elsewhere). Here rank 0
// reaches its root at 127.0.0.1 and the others at 127.0.0.2; the token is given, as it would
// otherwise be derived from MASTER_ADDR.
TEST(InitFromEnv, RootListensOnEveryAddress) {
  mp::ScopedEnv addr("SYMCOMM_BOOTSTRAP_ADDR", ""), timeout("SYMCOMM_BOOTSTRAP_TIMEOUT", "5");
  int port = free_port() - 1;  // the root listens on MASTER_PORT + 1
  join_from({{"RANK", std::to_string(mp::rank())},
             {"WORLD_SIZE", std::to_string(mp::nranks())},
             {"MASTER_ADDR", mp::rank() == 0 ? "127.0.0.1" : "127.0.0.2"},
             {"MASTER_PORT", std::to_string(port)},
             {"SYMCOMM_BOOTSTRAP_TOKEN", "0123456789abcdef0123456789abcdef"}});
}
