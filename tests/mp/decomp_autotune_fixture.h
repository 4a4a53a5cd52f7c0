// What the autotuner tests share (decomp_autotune_test.cc, decomp_autotune_halo_test.cc,
// decomp_autotune_heap_test.cc, one binary): small configurations, rank 0's report and its
// tables, the backends that run here, and checks that a decomposition works or is rejected.
#ifndef SYMCOMM_TESTS_MP_DECOMP_AUTOTUNE_FIXTURE_H_
#define SYMCOMM_TESTS_MP_DECOMP_AUTOTUNE_FIXTURE_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mp.h"
#include "symcomm/decomp.h"
#include "transpose_check.h"

namespace decomp_autotune_test {

inline symcommDecompConfig_t tiny_config(int64_t x, int64_t y, int64_t z) {
  symcommDecompConfig_t c;
  symcommDecompConfigInit(&c);
  c.gdims[0] = x;
  c.gdims[1] = y;
  c.gdims[2] = z;
  c.autotune_warmup = 0;
  c.autotune_trials = 1;
  std::snprintf(c.backend, sizeof c.backend, "auto");
  return c;
}

// One row of the autotuner's final table as rank 0 printed it.
struct Row {
  int pr = 0, pc = 0;    // the grid table only
  std::string backend;
  std::string score;     // the score in us, "skipped" or "cannot run"
  std::string why;       // "cannot run": the reason printed after it
  bool chosen = false;
};

// Rank 0's `out`, on every rank (collective).
inline std::string rank0(const std::string& out) {
  uint64_t bytes = mp::rank() == 0 ? out.size() : 0;
  EXPECT_EQ(symcommHostBroadcast(mp::world(), &bytes, sizeof bytes, 0), symcommSuccess);
  std::string text = out;
  text.resize(bytes);
  if (bytes) {
    EXPECT_EQ(symcommHostBroadcast(mp::world(), text.data(), bytes, 0), symcommSuccess);
  }
  return text;
}

// What creating a decomposition from `c` (collective) printed on stderr, and its result.
struct Created {
  symcommResult_t rc;
  std::string error;  // symcommGetLastError() where rc failed
  std::string out;    // this rank's stderr
  std::string out0;   // rank 0's
  symcommDecomp_t decomp = nullptr;
};

inline Created create_capturing(const symcommDecompConfig_t& c) {
  Created r;
  ::testing::internal::CaptureStderr();
  r.rc = symcommDecompCreate(mp::world(), &c, &r.decomp);
  r.out = ::testing::internal::GetCapturedStderr();
  if (r.rc != symcommSuccess) r.error = symcommGetLastError();
  r.out0 = rank0(r.out);
  return r;
}

inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> all;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    all.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return all;
}

// The rows of the table headed "<what> table" in `out` ("grid and transpose backend" or
// "halo backend"), in the order the candidates ran.
inline std::vector<Row> table(const std::string& out, const std::string& what) {
  std::vector<Row> rows;
  bool in = false;
  const std::string head = "symcomm autotune: " + what + " table";
  for (const std::string& l : lines(out)) {
    if (l.rfind(head, 0) == 0) {
      in = true;
      continue;
    }
    if (!in || l.rfind("symcomm autotune: ", 0) != 0) continue;
    Row r;
    char backend[64] = {}, score[64] = {};
    if (what == "halo backend") {
      if (std::sscanf(l.c_str(), "symcomm autotune: halo backend %63s %63[a-z0-9. ]", backend,
                      score) != 2)
        break;  // the end of the table
    } else if (std::sscanf(l.c_str(), "symcomm autotune: grid %dx%d backend %63s %63[a-z0-9. ]",
                           &r.pr, &r.pc, backend, score) != 4) {
      break;
    }
    r.backend = backend;
    r.score = score;
    while (!r.score.empty() && r.score.back() == ' ') r.score.pop_back();
    r.chosen = l.find("<- chosen") != std::string::npos;
    if (const size_t at = l.find("cannot run: "); at != std::string::npos) r.why = l.substr(at + 12);
    rows.push_back(r);
  }
  return rows;
}

inline bool ran(const Row& r) { return r.score != "skipped" && r.score != "cannot run"; }

// Whether `backend` can run on the world communicator on a 1 x n grid (collective).
inline bool runs_here(const char* backend) {
  symcommDecompConfig_t c = tiny_config(8, 8, 8);
  c.pdims[0] = 1;
  c.pdims[1] = mp::nranks();
  std::snprintf(c.backend, sizeof c.backend, "%s", backend);
  symcommDecomp_t d = nullptr;
  if (symcommDecompCreate(mp::world(), &c, &d) != symcommSuccess) return false;
  EXPECT_EQ(symcommDecompDestroy(d), symcommSuccess);
  return true;
}

// The backends that run on the world communicator, in the registry's order (collective,
// asked once): what the filters and configurations below name.
inline const std::vector<std::string>& runnable() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (int i = 0; i < symcommDecompBackendCount(); ++i)
      if (runs_here(symcommDecompBackendName(i))) all.push_back(symcommDecompBackendName(i));
    return all;
  }();
  return names;
}

// The backend the tests below name where any one that runs will do (the last that runs here),
// and another one (the first), "" where there is none. Collective.
inline std::string one() {
  EXPECT_FALSE(runnable().empty()) << "no backend runs here";
  return runnable().empty() ? "" : runnable().back();
}
inline std::string another() {
  EXPECT_GE(runnable().size(), 2u) << "fewer than two backends run here";
  return runnable().size() < 2 ? "" : runnable().front();
}

// What the registered backend `index` needs (its descriptor).
inline symcommDecompBackendInfo_t info_of(int index) {
  symcommDecompBackendInfo_t info{};
  EXPECT_EQ(symcommDecompGetBackendInfo(index, &info), symcommSuccess) << symcommGetLastError();
  return info;
}

// Every rank of `comm` is load/store accessible from this one (the same answer on every rank).
inline bool every_rank_mapped(symcommComm_t comm) {
  int n = 0;
  EXPECT_EQ(symcommCommSize(comm, &n), symcommSuccess);
  for (int pe = 0; pe < n; ++pe) {
    int accessible = 0;
    EXPECT_EQ(symcommPeerAccessible(comm, pe, &accessible), symcommSuccess);
    if (!accessible) return false;
  }
  return true;
}

// The backends the autotuner tries unasked (no filter names them) on `comm`: every one, but
// those meant for ranks out of load/store reach where every rank is mapped.
inline size_t unasked_candidates(symcommComm_t comm) {
  size_t count = 0;
  for (int i = 0; i < symcommDecompBackendCount(); ++i)
    count += !info_of(i).for_unmapped_ranks || !every_rank_mapped(comm);
  return count;
}

inline double value(const int64_t* g, int64_t x, int64_t y, int64_t z) {
  return mp::global_index(g, x, y, z);
}

inline void expect_transposes_work(symcommDecomp_t d, const int64_t* g) {
  mp::expect_transposes_work(mp::world(), d, g);
}

// A periodic halo exchange of the X pencil along y (split over the rows) with a halo of one:
// both y halos hold the wrapped-around neighbours' points afterwards.
inline void expect_y_halo_works(symcommDecomp_t d, const int64_t* g) {
  const int64_t halo[3] = {0, 1, 0};
  const int periodic[3] = {1, 1, 1};
  symcommPencilInfo_t p;
  SC_OK(symcommDecompPencilInfo(d, 0, halo, nullptr, &p));
  size_t ws_bytes = 0;
  SC_OK(symcommDecompHaloWorkspaceSize(d, 0, 1, symcommR64, halo, nullptr, &ws_bytes));
  std::vector<size_t> sizes(static_cast<size_t>(mp::nranks()));
  SC_OK(symcommHostAllgather(mp::world(), &ws_bytes, sizes.data(), sizeof ws_bytes));
  void* ws = nullptr;
  SC_OK(symcommMalloc(mp::world(), std::max<size_t>(8, *std::max_element(sizes.begin(), sizes.end())), &ws));
  std::vector<double> host(static_cast<size_t>(p.size), -1.0);
  for (int64_t z = p.lo[2]; z < p.hi[2]; ++z)
    for (int64_t y = p.lo[1]; y < p.hi[1]; ++y)
      for (int64_t x = p.lo[0]; x < p.hi[0]; ++x)
        host[static_cast<size_t>(symcommPencilIndex(&p, x, y, z))] = value(g, x, y, z);
  void* buf = mp::local_alloc(host.size() * 8);
  mp::copy_from_host(buf, host.data(), host.size() * 8);
  symcommStream_t stream = mp::new_stream();
  SC_OK(symcommDecompHalo(d, 0, 1, buf, ws, symcommR64, halo, nullptr, periodic, stream));
  mp::sync(stream);
  mp::copy_to_host(host.data(), buf, host.size() * 8);
  int64_t bad = 0;
  for (int64_t z = p.lo[2]; z < p.hi[2]; ++z)
    for (int64_t x = p.lo[0]; x < p.hi[0]; ++x)
      for (int64_t y : {p.lo[1] - 1, p.hi[1]})
        bad += host[static_cast<size_t>(symcommPencilIndex(&p, x, y, z))] !=
               value(g, x, (y + g[1]) % g[1], z);
  EXPECT_EQ(bad, 0) << "y halo points wrong";
  mp::free_stream(stream);
  mp::local_free(buf);
  SC_OK(symcommFree(mp::world(), ws));
}

// Creating a decomposition from `c` fails with `code` and an error that says `says`.
inline void expect_rejected(const symcommDecompConfig_t& c, symcommResult_t code,
                            const char* says) {
  symcommDecomp_t d = nullptr;
  SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), code);
  EXPECT_NE(std::strstr(symcommGetLastError(), says), nullptr) << symcommGetLastError();
  EXPECT_EQ(d, nullptr);
}

// The configuration in force, checked to be the same on every rank.
inline symcommDecompConfig_t agreed_choice(symcommDecomp_t d) {
  symcommDecompConfig_t chosen;
  EXPECT_EQ(symcommDecompGetConfig(d, &chosen), symcommSuccess);
  std::vector<symcommDecompConfig_t> all(static_cast<size_t>(mp::nranks()));
  EXPECT_EQ(symcommHostAllgather(mp::world(), &chosen, all.data(), sizeof chosen), symcommSuccess);
  for (const symcommDecompConfig_t& other : all)
    EXPECT_EQ(std::memcmp(&other, &chosen, sizeof chosen), 0) << "ranks chose differently";
  return chosen;
}

}  // namespace decomp_autotune_test

#endif  // SYMCOMM_TESTS_MP_DECOMP_AUTOTUNE_FIXTURE_H_
