// Shared by the box copy tests (box_copy_single_test.cu: copy_box and copy_box_ce;
// box_copy_batch_test.cu: copy_boxes; one binary, box_copy_test): the seeds, the arrays,
// boxes and cases, the reference and the comparison, the spaces (host and GPU 0), random
// cases and the fixtures HostBoxCopy and GpuBoxCopy. What the tests check and how: the
// comment at the head of box_copy_single_test.cu.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/cuda_driver.h"
#include "copy/copies.h"
#include "rma/rma.h"
#include "topology/topology.h"

namespace box_copy_test {

using symcomm::BoxCopy;
using symcomm::BoxLayout;
using symcomm::Copies;
using symcomm::RmaBackend;
using Bytes = std::vector<uint8_t>;
using Rng = std::mt19937_64;

constexpr uint64_t kDefaultSeed = 20261201;
constexpr size_t kGuardBytes = 256;  // poison after each array, a multiple of every element size
constexpr int kMaxReported = 8;      // differing elements described per failing case
constexpr int kMaxFailedCases = 5;   // a test stops after this many failing cases
inline constexpr size_t kElemSizes[] = {4, 8, 16};

// ---------------------------------------------------------------------------------------
// Seeds, random numbers, CUDA errors

inline uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("BOX_COPY_SEED");
    return env && *env ? std::strtoull(env, nullptr, 0) : kDefaultSeed;
  }();
  return seed;
}

// A test's own seed: the base seed and the test's name (not its suite's), so that the host
// and the GPU tests of one name draw the same cases, whichever other tests run.
inline uint64_t test_seed() {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* p = ::testing::UnitTest::GetInstance()->current_test_info()->name(); *p; ++p)
    h = (h ^ static_cast<uint8_t>(*p)) * 1099511628211ull;
  return base_seed() ^ h;
}

inline int64_t uniform(Rng& rng, int64_t lo, int64_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
inline bool chance(Rng& rng, int percent) { return uniform(rng, 0, 99) < percent; }

inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  std::ostringstream m;
  m << file << ":" << line << ": " << call << " failed: " << cudaGetErrorName(e) << ": "
    << cudaGetErrorString(e);
  throw std::runtime_error(m.str());  // gtest reports it as the test's failure
}
#define CHECK_CUDA(call) check_cuda((call), #call, __FILE__, __LINE__)

// ---------------------------------------------------------------------------------------
// Arrays, boxes and cases

inline constexpr char kAxis[] = "xyz";

inline std::string triple(const int64_t v[3]) {
  std::ostringstream s;
  s << "(" << v[0] << "," << v[1] << "," << v[2] << ")";
  return s.str();
}

struct Box {
  int64_t lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};  // [lo, hi), global indices
  int64_t n(int a) const { return hi[a] - lo[a]; }
  bool contains(const int64_t g[3]) const {
    for (int a = 0; a < 3; ++a)
      if (g[a] < lo[a] || g[a] >= hi[a]) return false;
    return true;
  }
  std::string str() const {
    std::ostringstream s;
    s << "box [" << triple(lo) << ", " << triple(hi) << ")";
    return s.str();
  }
};

// A local 3D array: where its elements lie in its allocation.
struct Array {
  int64_t ext[3] = {1, 1, 1};
  int64_t pad[3] = {1, 1, 1};     // per axis the extent in memory, >= ext
  int order[3] = {0, 1, 2};       // the axes from the fastest in memory to the slowest
  int64_t origin[3] = {0, 0, 0};  // global index of the array's first element per axis
  int64_t slice_extra = 0;        // elements after each slice beyond its whole rows
  int64_t shift = 0;              // elements of the allocation before the array

  int64_t row_pitch() const { return pad[order[0]]; }
  int64_t slice_pitch() const { return pad[order[0]] * pad[order[1]] + slice_extra; }
  int64_t span() const { return slice_pitch() * pad[order[2]]; }
  size_t alloc_bytes(size_t elem) const {
    return static_cast<size_t>(shift + span()) * elem + kGuardBytes;
  }

  // The reference's index of global element g from the array's start: by memory order.
  int64_t index(const int64_t g[3]) const {
    const int64_t c0 = g[order[0]] - origin[order[0]], c1 = g[order[1]] - origin[order[1]],
                  c2 = g[order[2]] - origin[order[2]];
    return c0 + row_pitch() * c1 + slice_pitch() * c2;
  }
  bool contains(const int64_t g[3]) const {
    for (int a = 0; a < 3; ++a)
      if (g[a] < origin[a] || g[a] >= origin[a] + ext[a]) return false;
    return true;
  }
  // What the backend is told (the code under test computes offsets from this).
  BoxLayout layout() const {
    BoxLayout l{};
    l.stride[order[0]] = 1;
    l.stride[order[1]] = row_pitch();
    l.stride[order[2]] = slice_pitch();
    for (int a = 0; a < 3; ++a) l.origin[a] = origin[a];
    return l;
  }
  std::string order_str() const { return {kAxis[order[0]], kAxis[order[1]], kAxis[order[2]]}; }
  std::string str() const {
    std::ostringstream s;
    s << "ext " << triple(ext) << " pad " << triple(pad) << " order " << order_str()
      << " (fastest first) origin " << triple(origin) << " slice_extra " << slice_extra
      << " shift " << shift;
    return s.str();
  }

  // Builders for the directed cases.
  Array& padded(int64_t px, int64_t py, int64_t pz) {
    const int64_t p[3] = {px, py, pz};
    for (int a = 0; a < 3; ++a) pad[a] = ext[a] + p[a];
    return *this;
  }
  Array& at(int64_t ox, int64_t oy, int64_t oz) {
    origin[0] = ox, origin[1] = oy, origin[2] = oz;
    return *this;
  }
  Array& shifted(int64_t elements) { shift = elements; return *this; }
  Array& slice_gap(int64_t elements) { slice_extra = elements; return *this; }
};

// An array of extents x, y, z in memory order `order` ("yxz": y fastest, then x, then z).
inline Array make_array(int64_t x, int64_t y, int64_t z, const char* order) {
  Array a;
  a.ext[0] = a.pad[0] = x;
  a.ext[1] = a.pad[1] = y;
  a.ext[2] = a.pad[2] = z;
  for (int i = 0; i < 3; ++i) {
    const char* p = std::strchr(kAxis, order[i]);
    if (order[i] == '\0' || p == nullptr)
      throw std::logic_error(std::string("test bug: order ") + order);
    a.order[i] = static_cast<int>(p - kAxis);
  }
  return a;
}

inline Box make_box(int64_t x0, int64_t x1, int64_t y0, int64_t y1, int64_t z0, int64_t z1) {
  Box b;
  b.lo[0] = x0, b.hi[0] = x1, b.lo[1] = y0, b.hi[1] = y1, b.lo[2] = z0, b.hi[2] = z1;
  return b;
}

// What copy_box_ce must return on GPUs for a directed case.
enum class CeExpect { Either, Yes, No };

struct Case {
  std::string label;
  Array src, dst;
  Box box;
  size_t elem = 8;
  CeExpect ce = CeExpect::Either;
  std::string str() const {
    std::ostringstream s;
    s << "[" << label << "] elem " << elem << " B, " << box.str() << "\n    src " << src.str()
      << "\n    dst " << dst.str() << "\n    (base seed " << base_seed()
      << "; BOX_COPY_SEED=<n> changes it)";
    return s.str();
  }
};

// A test's own mistakes: bad extents, or a (non-empty) box not inside both arrays.
inline void check_case(const Case& c) {
  for (const Array* x : {&c.src, &c.dst})
    for (int a = 0; a < 3; ++a)
      if (x->ext[a] < 1 || x->pad[a] < x->ext[a] || x->slice_extra < 0 || x->shift < 0)
        throw std::logic_error("test bug: bad array: " + c.str());
  if (c.box.n(0) <= 0 || c.box.n(1) <= 0 || c.box.n(2) <= 0) return;
  const int64_t last[3] = {c.box.hi[0] - 1, c.box.hi[1] - 1, c.box.hi[2] - 1};
  for (const Array* x : {&c.src, &c.dst})
    if (!x->contains(c.box.lo) || !x->contains(last))
      throw std::logic_error("test bug: the box is not inside both arrays: " + c.str());
}

// ---------------------------------------------------------------------------------------
// The reference and the comparison

inline Bytes random_bytes(Rng& rng, size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(&b[i], &v, std::min<size_t>(8, n - i));
  }
  return b;
}

inline uint8_t poison_byte(size_t i) { return static_cast<uint8_t>((i * 151 + 0x5b) ^ 0xa5); }

inline Bytes poison(size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = poison_byte(i);
  return b;
}

// Copies the box's elements of `src` (the source's whole allocation) into `dst` (the
// destination's), element by element, each array indexed by Array::index.
inline void reference_copy(Bytes& dst, const Array& d, const Bytes& src, const Array& s,
                           const Box& b, size_t elem) {
  for (int64_t z = b.lo[2]; z < b.hi[2]; ++z)
    for (int64_t y = b.lo[1]; y < b.hi[1]; ++y)
      for (int64_t x = b.lo[0]; x < b.hi[0]; ++x) {
        const int64_t g[3] = {x, y, z};
        const auto di = static_cast<size_t>(d.shift + d.index(g)) * elem;
        const auto si = static_cast<size_t>(s.shift + s.index(g)) * elem;
        std::memcpy(&dst[di], &src[si], elem);
      }
}

// Where element e of an array's allocation lies, in words.
inline std::string where(const Array& a, const Box& b, int64_t e) {
  if (e < a.shift) return "before the array's start";
  int64_t l = e - a.shift;
  if (l >= a.span()) return "in the guard after the array";
  const int64_t c2 = l / a.slice_pitch();
  l %= a.slice_pitch();
  if (l >= a.row_pitch() * a.pad[a.order[1]]) return "in the gap after a slice";
  const int64_t c1 = l / a.row_pitch(), c0 = l % a.row_pitch();
  int64_t g[3];
  g[a.order[0]] = a.origin[a.order[0]] + c0;
  g[a.order[1]] = a.origin[a.order[1]] + c1;
  g[a.order[2]] = a.origin[a.order[2]] + c2;
  if (!a.contains(g)) return "in the padding, at " + triple(g);
  return (b.contains(g) ? "in the box at " : "outside the box at ") + triple(g);
}

inline std::string hex(const Bytes& v, size_t off, size_t len) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < len; ++i) {
    s += digits[v[off + i] >> 4];
    s += digits[v[off + i] & 15];
  }
  return s;
}

// The whole allocation of array `a` equals the expected bytes, else which elements differ.
inline ::testing::AssertionResult same_bytes(const Bytes& got, const Bytes& want,
                                             const Array& a, const Box& b, size_t elem) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  if (std::memcmp(got.data(), want.data(), got.size()) == 0) return ::testing::AssertionSuccess();
  int64_t bad = 0;
  std::ostringstream report;
  for (size_t off = 0; off < got.size(); off += elem) {
    const size_t len = std::min(elem, got.size() - off);
    if (std::memcmp(&got[off], &want[off], len) == 0) continue;
    if (bad++ < kMaxReported)
      report << "\n  element " << off / elem << " of the allocation, "
             << where(a, b, static_cast<int64_t>(off / elem)) << ": got " << hex(got, off, len)
             << ", want " << hex(want, off, len);
  }
  return ::testing::AssertionFailure() << bad << " of " << got.size() / elem
                                       << " elements differ (first " << kMaxReported
                                       << " shown):" << report.str();
}

// ---------------------------------------------------------------------------------------
// Spaces: where the arrays live and which copies copy them

class Space {
 public:
  virtual ~Space() = default;
  virtual bool gpu() const = 0;
  virtual Copies& copies() = 0;
  virtual symcommStream_t stream() = 0;
  virtual char* allocate(size_t bytes) = 0;
  virtual void release(char* p) = 0;
  virtual void write(char* dst, const Bytes& b) = 0;
  virtual Bytes read(const char* src, size_t bytes) = 0;
  // Waits until what the copies issued has completed; throws on an error.
  virtual void finish() = 0;
};

inline symcomm::Topology one_rank_topology(int device) {
  symcomm::Topology t;
  t.rank = 0;
  t.nranks = 1;
  t.device = device;
  t.node_of = {0};
  t.local_ranks = {0};
  t.accessible = {1};
  t.gpu_owner = {0};
  return t;
}

class HostSpace final : public Space {
 public:
  HostSpace()
      : topology_(one_rank_topology(-1)),
        rma_(symcomm::make_host_rma(topology_)),
        copies_(symcomm::make_host_copies(*rma_)) {}
  bool gpu() const override { return false; }
  Copies& copies() override { return *copies_; }
  symcommStream_t stream() override { return nullptr; }
  char* allocate(size_t bytes) override { return new char[bytes]; }
  void release(char* p) override { delete[] p; }
  void write(char* dst, const Bytes& b) override { std::memcpy(dst, b.data(), b.size()); }
  Bytes read(const char* src, size_t bytes) override { return Bytes(src, src + bytes); }
  void finish() override {}

 private:
  symcomm::Topology topology_;  // the backend keeps a reference
  std::unique_ptr<RmaBackend> rma_;
  std::unique_ptr<Copies> copies_;  // uses rma_
};

inline bool gpu_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    (void)cudaGetLastError();
    return false;
  }
  if (n == 0) {
    *why = "cudaGetDeviceCount found no device";
    return false;
  }
  if (symcomm::CudaDriver::get() == nullptr) {  // the backend loads the driver API itself
    *why = symcomm::CudaDriver::unavailable_reason();
    return false;
  }
  return true;
}

// The cuda copies of a one-rank communicator on GPU 0, on its RMA backend: a window (unused
// by box copies but required), the barrier area (likewise) and a stream of its own.
class CudaSpace final : public Space {
 public:
  CudaSpace() : topology_(one_rank_topology(0)) {
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaMalloc(&window_, kWindowBytes));
    CHECK_CUDA(cudaMalloc(&area_, symcomm::RmaLayout::area_bytes(1)));
    CHECK_CUDA(cudaMemset(area_, 0, symcomm::RmaLayout::area_bytes(1)));
    rma_ = symcomm::make_cuda_rma(topology_, {window_}, area_);
    copies_ = symcomm::make_cuda_copies(topology_, *rma_, {window_});
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaSpace() override {
    copies_.reset();
    rma_.reset();
    if (stream_) cudaStreamDestroy(stream_);
    cudaFree(area_);
    cudaFree(window_);
  }
  bool gpu() const override { return true; }
  Copies& copies() override { return *copies_; }
  symcommStream_t stream() override { return stream_; }
  char* allocate(size_t bytes) override {
    void* p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, bytes));
    return static_cast<char*>(p);
  }
  void release(char* p) override { cudaFree(p); }
  // Copies on the test's stream, then waits: ordered with the backend's work on that stream.
  void write(char* dst, const Bytes& b) override {
    CHECK_CUDA(cudaMemcpyAsync(dst, b.data(), b.size(), cudaMemcpyHostToDevice, stream_));
    CHECK_CUDA(cudaStreamSynchronize(stream_));
  }
  Bytes read(const char* src, size_t bytes) override {
    Bytes b(bytes);
    CHECK_CUDA(cudaMemcpyAsync(b.data(), src, bytes, cudaMemcpyDeviceToHost, stream_));
    CHECK_CUDA(cudaStreamSynchronize(stream_));
    return b;
  }
  void finish() override {
    CHECK_CUDA(cudaGetLastError());  // a launch the backend did not check
    CHECK_CUDA(cudaStreamSynchronize(stream_));
    CHECK_CUDA(cudaGetLastError());  // a fault while the kernels ran
  }

 private:
  static constexpr size_t kWindowBytes = 1 << 20;
  symcomm::Topology topology_;  // the backend keeps a reference
  char* window_ = nullptr;
  char* area_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<RmaBackend> rma_;
  std::unique_ptr<Copies> copies_;  // uses rma_
};

// An allocation of a space, holding given bytes.
class Buffer {
 public:
  Buffer(Space& space, const Bytes& contents)
      : space_(space), size_(contents.size()), data_(space.allocate(contents.size())) {
    space_.write(data_, contents);
  }
  ~Buffer() { space_.release(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* data() const { return data_; }
  Bytes read() const { return space_.read(data_, size_); }

 private:
  Space& space_;
  size_t size_;
  char* data_;
};

// ---------------------------------------------------------------------------------------
// Running cases

// Stops a loop of cases after kMaxFailedCases failures (one bug fails many cases).
class FailureBudget {
 public:
  bool exhausted(bool ok) {
    if (!ok && ++failed_ == kMaxFailedCases) {
      ADD_FAILURE() << "stopping this test after " << kMaxFailedCases << " failing cases";
      return true;
    }
    return failed_ >= kMaxFailedCases;
  }

 private:
  int failed_ = 0;
};

// ---------------------------------------------------------------------------------------
// Random cases

// An extent in [1, max], often 1 or near a multiple of the 32-element tile.
inline int64_t pick_extent(Rng& rng, int64_t max) {
  switch (uniform(rng, 0, 9)) {
    case 0: return 1;
    case 1: return std::min<int64_t>(max, 32 * uniform(rng, 1, 2));
    case 2: return std::clamp<int64_t>(32 * uniform(rng, 1, 2) + uniform(rng, -1, 1), 1, max);
    default: return uniform(rng, 1, max);
  }
}

// A memory order with `fastest` first (any where -1).
inline void pick_order(Rng& rng, int fastest, int order[3]) {
  std::iota(order, order + 3, 0);
  std::shuffle(order, order + 3, rng);
  if (fastest >= 0) std::swap(order[0], *std::find(order, order + 3, fastest));
}

// An array of extents `ext` around the box: its origin puts the box at a random place
// inside; padding, a slice gap and a shifted start at random.
inline Array random_array(Rng& rng, const int64_t ext[3], const Box& b, int fastest) {
  Array a;
  pick_order(rng, fastest, a.order);
  for (int i = 0; i < 3; ++i) {
    a.ext[i] = ext[i];
    a.pad[i] = ext[i] + (chance(rng, 40) ? uniform(rng, 1, 5) : 0);
    a.origin[i] = b.lo[i] - uniform(rng, 0, ext[i] - std::max<int64_t>(b.n(i), 0));
  }
  a.slice_extra = chance(rng, 15) ? uniform(rng, 1, 7) : 0;
  a.shift = chance(rng, 50) ? uniform(rng, 1, 3) : 0;
  return a;
}

// A random case with extents up to `max` per axis. `src_fastest` / `dst_fastest` >= 0 fix
// an array's fastest axis, along which the box then has 2 elements at least (that side is
// contiguous along the box). `empty`: one axis of the box has no element.
inline Case random_case(Rng& rng, int64_t max, size_t elem, int src_fastest = -1,
                        int dst_fastest = -1, bool empty = false) {
  int64_t se[3], de[3];
  Box b;
  for (int a = 0; a < 3; ++a) {
    const int64_t least = a == src_fastest || a == dst_fastest ? 2 : 1;
    se[a] = std::max(least, pick_extent(rng, max));
    de[a] = std::max(least, pick_extent(rng, max));
    const int64_t room = std::min(se[a], de[a]);
    const int64_t n = chance(rng, 25) ? room : chance(rng, 15) ? least : uniform(rng, least, room);
    b.lo[a] = uniform(rng, -40, 40);
    b.hi[a] = b.lo[a] + n;
  }
  if (empty) {
    const int a = static_cast<int>(uniform(rng, 0, 2));
    b.hi[a] = b.lo[a];
  }
  Case c;
  c.label = "random";
  c.elem = elem;
  c.box = b;
  c.src = random_array(rng, se, b, src_fastest);
  c.dst = random_array(rng, de, b, dst_fastest);
  return c;
}

inline size_t random_elem(Rng& rng) { return kElemSizes[uniform(rng, 0, 2)]; }

// ---------------------------------------------------------------------------------------
// Fixtures and tests

class HostBoxCopy : public ::testing::Test {
 protected:
  void SetUp() override { space_ = std::make_unique<HostSpace>(); }
  std::unique_ptr<Space> space_;
};

class GpuBoxCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!gpu_available(&why)) GTEST_SKIP() << "no GPU: " << why;
    space_ = std::make_unique<CudaSpace>();
  }
  std::unique_ptr<Space> space_;
};

}  // namespace box_copy_test
