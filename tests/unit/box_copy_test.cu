// Direct tests of the box copies of the RMA backends (src/rma/rma.h): copy_box, copy_boxes
// and copy_box_ce, on GPU 0 through the cuda backend (rma_cuda.cu) and on the host through
// the host backend (rma_host.cc), against a reference computed here.
//
// Why: the decomposition tests reach these copies only with the shapes their pencils happen
// to have, while the cuda backend picks its kernel by the layouts (shape_box):
//   - rows along an axis contiguous on both sides (the axes permuted on the host), moved as
//     16-byte vectors where a row starts 16-byte aligned on both sides, else by element;
//   - 32 x 32 shared-memory tiles where the source and the destination are contiguous along
//     different axes (partial tiles at the edges);
//   - rows with a stride on both sides where neither side is contiguous along the box;
//   - a thread per element for rows shorter than 32;
//   - copy_boxes: up to 16 boxes per launch, the row boxes and the tiled ones launched apart;
//   - copy_box_ce: one cudaMemcpy/2D/3D after merging contiguous axes, or false (nothing
//     issued) where the layouts walk the box's axes in different orders, the first axis has
//     no unit stride, or a slice pitch is not a whole number of rows.
// A wrong index, a missed partial tile, a write past a row or a misaligned vector each
// shows here as a difference from the reference, with the case and the elements named.
//
// How: a case is two 3D arrays and a box inside both. An array has per axis an extent, a
// padded extent and the global index of its first element (its origin); a memory order (a
// permutation of x, y, z); optionally elements between slices beyond whole rows; and its
// start shifted by whole elements within its allocation. The source allocation holds
// random bytes, the destination's a position-dependent poison. After the copy the whole
// destination allocation, including the elements before the array, its padding and a
// 256-byte guard after it, must equal the expected bytes: the box holds the source's
// elements, everything else is still poison. The reference indexes the arrays from their
// extents and memory order, not from the BoxLayout strides handed to the backend.
//
// Cases: directed ones that hit each path on purpose (directed_cases), large ones that
// need more blocks than a launch has (grid-stride loops, GPU only), and random ones from a
// fixed seed (printed; BOX_COPY_SEED=<n> changes it): extents 1..70 per axis, biased to 1
// and to multiples of 32 and their neighbours; element sizes 4, 8 and 16 bytes.
//
// Tests: HostBoxCopy.* (the host backend: runs everywhere, ctest unit_box_copy) and
// GpuBoxCopy.* (the cuda backend on GPU 0, ctest gpu_box_copy). Without a GPU the
// GpuBoxCopy tests skip, and the binary exits with 77 (ctest's SKIP_RETURN_CODE) when every
// test that ran was skipped.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
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
#include "rma/rma.h"
#include "topology/topology.h"

namespace {

using symcomm::BoxCopy;
using symcomm::BoxLayout;
using symcomm::RmaBackend;
using Bytes = std::vector<uint8_t>;
using Rng = std::mt19937_64;

constexpr uint64_t kDefaultSeed = 20261201;
constexpr size_t kGuardBytes = 256;  // poison after each array, a multiple of every element size
constexpr int kMaxReported = 8;      // differing elements described per failing case
constexpr int kMaxFailedCases = 5;   // a test stops after this many failing cases
constexpr size_t kElemSizes[] = {4, 8, 16};

// ---------------------------------------------------------------------------------------
// Seeds, random numbers, CUDA errors

uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("BOX_COPY_SEED");
    return env && *env ? std::strtoull(env, nullptr, 0) : kDefaultSeed;
  }();
  return seed;
}

// A test's own seed: the base seed and the test's name (not its suite's), so that the host
// and the GPU tests of one name draw the same cases, whichever other tests run.
uint64_t test_seed() {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* p = ::testing::UnitTest::GetInstance()->current_test_info()->name(); *p; ++p)
    h = (h ^ static_cast<uint8_t>(*p)) * 1099511628211ull;
  return base_seed() ^ h;
}

int64_t uniform(Rng& rng, int64_t lo, int64_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
bool chance(Rng& rng, int percent) { return uniform(rng, 0, 99) < percent; }

void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  std::ostringstream m;
  m << file << ":" << line << ": " << call << " failed: " << cudaGetErrorName(e) << ": "
    << cudaGetErrorString(e);
  throw std::runtime_error(m.str());  // gtest reports it as the test's failure
}
#define CHECK_CUDA(call) check_cuda((call), #call, __FILE__, __LINE__)

// ---------------------------------------------------------------------------------------
// Arrays, boxes and cases

constexpr char kAxis[] = "xyz";

std::string triple(const int64_t v[3]) {
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
Array make_array(int64_t x, int64_t y, int64_t z, const char* order) {
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

Box make_box(int64_t x0, int64_t x1, int64_t y0, int64_t y1, int64_t z0, int64_t z1) {
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
void check_case(const Case& c) {
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

Bytes random_bytes(Rng& rng, size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(&b[i], &v, std::min<size_t>(8, n - i));
  }
  return b;
}

uint8_t poison_byte(size_t i) { return static_cast<uint8_t>((i * 151 + 0x5b) ^ 0xa5); }

Bytes poison(size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = poison_byte(i);
  return b;
}

// Copies the box's elements of `src` (the source's whole allocation) into `dst` (the
// destination's), element by element, each array indexed by Array::index.
void reference_copy(Bytes& dst, const Array& d, const Bytes& src, const Array& s, const Box& b,
                    size_t elem) {
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
std::string where(const Array& a, const Box& b, int64_t e) {
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

std::string hex(const Bytes& v, size_t off, size_t len) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < len; ++i) {
    s += digits[v[off + i] >> 4];
    s += digits[v[off + i] & 15];
  }
  return s;
}

// The whole allocation of array `a` equals the expected bytes, else which elements differ.
::testing::AssertionResult same_bytes(const Bytes& got, const Bytes& want, const Array& a,
                                      const Box& b, size_t elem) {
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
// Spaces: where the arrays live and which backend copies them

class Space {
 public:
  virtual ~Space() = default;
  virtual bool gpu() const = 0;
  virtual RmaBackend& rma() = 0;
  virtual symcommStream_t stream() = 0;
  virtual char* allocate(size_t bytes) = 0;
  virtual void release(char* p) = 0;
  virtual void write(char* dst, const Bytes& b) = 0;
  virtual Bytes read(const char* src, size_t bytes) = 0;
  // Waits until what the backend issued has completed; throws on an error.
  virtual void finish() = 0;
};

symcomm::Topology one_rank_topology(int device) {
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
  HostSpace() : topology_(one_rank_topology(-1)), rma_(symcomm::make_host_rma(topology_)) {}
  bool gpu() const override { return false; }
  RmaBackend& rma() override { return *rma_; }
  symcommStream_t stream() override { return nullptr; }
  char* allocate(size_t bytes) override { return new char[bytes]; }
  void release(char* p) override { delete[] p; }
  void write(char* dst, const Bytes& b) override { std::memcpy(dst, b.data(), b.size()); }
  Bytes read(const char* src, size_t bytes) override { return Bytes(src, src + bytes); }
  void finish() override {}

 private:
  symcomm::Topology topology_;  // the backend keeps a reference
  std::unique_ptr<RmaBackend> rma_;
};

bool gpu_available(std::string* why) {
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

// The cuda backend of a one-rank communicator on GPU 0: a window (unused by box copies but
// required), the barrier area (likewise) and a stream of its own.
class CudaSpace final : public Space {
 public:
  CudaSpace() : topology_(one_rank_topology(0)) {
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaMalloc(&window_, kWindowBytes));
    CHECK_CUDA(cudaMalloc(&area_, symcomm::RmaLayout::area_bytes(1)));
    CHECK_CUDA(cudaMemset(area_, 0, symcomm::RmaLayout::area_bytes(1)));
    rma_ = symcomm::make_cuda_rma(topology_, {window_}, area_);
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaSpace() override {
    rma_.reset();
    if (stream_) cudaStreamDestroy(stream_);
    cudaFree(area_);
    cudaFree(window_);
  }
  bool gpu() const override { return true; }
  RmaBackend& rma() override { return *rma_; }
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

enum class Via { Kernels, CopyEngine };

struct Outcome {
  bool issued = true;  // what copy_box_ce returned (copy_box: true)
  bool ok = true;      // the destination and the source are as expected
};

// Runs one case through copy_box or copy_box_ce and checks the whole destination
// allocation: the box copied when the copy was issued, everything else untouched.
Outcome run_case(Space& space, const Case& c, Via via, Rng& rng) {
  check_case(c);
  const Bytes src = random_bytes(rng, c.src.alloc_bytes(c.elem));
  const Bytes before = poison(c.dst.alloc_bytes(c.elem));
  Buffer s(space, src), d(space, before);
  const BoxLayout sl = c.src.layout(), dl = c.dst.layout();
  const char* sp = s.data() + c.src.shift * static_cast<int64_t>(c.elem);
  char* dp = d.data() + c.dst.shift * static_cast<int64_t>(c.elem);
  Outcome out;
  if (via == Via::Kernels)
    space.rma().copy_box(dp, dl, sp, sl, c.box.lo, c.box.hi, c.elem, space.stream());
  else
    out.issued =
        space.rma().copy_box_ce(dp, dl, sp, sl, c.box.lo, c.box.hi, c.elem, space.stream());
  space.finish();
  Bytes want = before;
  if (out.issued) reference_copy(want, c.dst, src, c.src, c.box, c.elem);
  const char* what = via == Via::Kernels ? "copy_box"
                     : out.issued        ? "copy_box_ce (returned true: the copy must be exact)"
                                         : "copy_box_ce (returned false: nothing may be written)";
  const auto dst_ok = same_bytes(d.read(), want, c.dst, c.box, c.elem);
  EXPECT_TRUE(dst_ok) << what << ", destination of " << c.str();
  const auto src_ok = same_bytes(s.read(), src, c.src, c.box, c.elem);
  EXPECT_TRUE(src_ok) << what << ", the source changed: " << c.str();
  out.ok = dst_ok && src_ok;
  return out;
}

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
// Directed cases: each path of the cuda backend on purpose

std::vector<Case> directed_cases() {
  using E = CeExpect;
  std::vector<Case> v;
  auto add = [&](const char* label, Array src, Array dst, Box box, E ce, size_t elem = 0) {
    for (size_t e : kElemSizes)
      if (elem == 0 || e == elem) v.push_back(Case{label, src, dst, box, e, ce});
  };

  // Rows along an axis contiguous on both sides.
  add("rows: x contiguous on both sides, same order, whole array (one run)",
      make_array(64, 8, 3, "xyz"), make_array(64, 8, 3, "xyz"),
      make_box(0, 64, 0, 8, 0, 3), E::Yes);
  add("rows: x contiguous on both, padded, origins apart, box inside",
      make_array(70, 9, 4, "xyz").padded(6, 1, 0), make_array(67, 12, 5, "xyz").at(-2, -1, 0),
      make_box(1, 60, 2, 9, 0, 4), E::Yes);
  add("rows: x contiguous on both, slow axes in other orders",
      make_array(40, 6, 5, "xyz"), make_array(40, 6, 5, "xzy"), make_box(0, 40, 0, 6, 0, 5), E::No);
  add("rows: y contiguous on both (axes permuted on the host)",
      make_array(7, 50, 3, "yxz"), make_array(7, 50, 3, "yzx"), make_box(1, 6, 3, 50, 0, 3), E::No);
  add("rows: z contiguous on both", make_array(5, 4, 33, "zyx"), make_array(5, 4, 33, "zxy"),
      make_box(0, 5, 0, 4, 0, 33), E::No);
  add("rows: z contiguous on both, same order, padded",
      make_array(5, 4, 40, "zyx").padded(1, 2, 3), make_array(6, 4, 35, "zyx").at(0, 0, 2),
      make_box(0, 5, 1, 4, 2, 37), E::Yes);
  add("rows: exact multiples of 32", make_array(64, 32, 2, "xyz"),
      make_array(64, 32, 2, "xyz").shifted(2), make_box(0, 64, 0, 32, 0, 2), E::Yes);

  // Tiles: contiguous along different axes.
  add("tiles: x-fastest source, y-fastest destination, whole tiles",
      make_array(64, 64, 2, "xyz"), make_array(64, 64, 2, "yxz"),
      make_box(0, 64, 0, 64, 0, 2), E::No);
  add("tiles: partial tiles on both axes",
      make_array(70, 33, 3, "xyz"), make_array(45, 65, 3, "yxz").at(-2, -20, 0),
      make_box(3, 40, 0, 31, 0, 3), E::No);
  add("tiles: y-fastest source, x-fastest destination",
      make_array(33, 31, 2, "yxz"), make_array(33, 31, 2, "xzy"),
      make_box(0, 33, 0, 31, 0, 2), E::No);
  add("tiles: x-fastest source, z-fastest destination",
      make_array(35, 3, 34, "xyz"), make_array(35, 3, 34, "zyx"),
      make_box(0, 35, 0, 3, 0, 34), E::No);
  add("tiles: z-fastest source, y-fastest destination",
      make_array(3, 40, 36, "zxy"), make_array(3, 40, 36, "yzx"),
      make_box(0, 3, 0, 40, 0, 36), E::No);
  add("tiles: a 2 x 2 box", make_array(2, 2, 1, "xyz"), make_array(2, 2, 1, "yxz"),
      make_box(0, 2, 0, 2, 0, 1), E::No);
  add("tiles: padded, gaps between slices, negative origins, shifted starts",
      make_array(50, 40, 3, "xyz").padded(3, 2, 1).at(-20, -10, -1).slice_gap(5),
      make_array(45, 50, 3, "yxz").padded(1, 5, 0).at(-15, -12, -1).shifted(1),
      make_box(-15, 30, -10, 28, -1, 2), E::No);

  // Short rows (a thread per element) and strided rows.
  add("short rows: x contiguous on both, rows of 5",
      make_array(40, 20, 6, "xyz"), make_array(9, 20, 6, "xyz").at(10, 0, 0),
      make_box(12, 17, 0, 20, 0, 6), E::Yes);
  add("short rows: rows of 31", make_array(31, 10, 3, "xyz"),
      make_array(40, 10, 3, "xyz").padded(2, 0, 0), make_box(0, 31, 0, 10, 0, 3), E::Yes);
  add("short rows: box of extent 1 along x, neither side contiguous along the box",
      make_array(40, 20, 6, "xyz"), make_array(40, 20, 6, "xyz"),
      make_box(7, 8, 0, 20, 0, 6), E::No);
  add("extent-1 fastest axis unpadded: the next axis is contiguous, rows along y",
      make_array(1, 40, 5, "xyz"), make_array(1, 40, 5, "xyz"),
      make_box(0, 1, 0, 40, 0, 5), E::Yes);
  add("extent-1 fastest axis padded on one side: no common contiguous axis",
      make_array(1, 40, 5, "xyz"), make_array(1, 40, 5, "xyz").padded(1, 0, 0),
      make_box(0, 1, 0, 40, 0, 5), E::No);
  add("strided rows of 40: neither side contiguous along the box",
      make_array(40, 3, 20, "yxz"), make_array(40, 3, 20, "yzx"),
      make_box(0, 40, 1, 2, 0, 20), E::No);
  add("strided short rows of 10", make_array(10, 3, 20, "yxz"), make_array(10, 3, 20, "yzx"),
      make_box(0, 10, 1, 2, 0, 20), E::No);

  // 16-byte vectors (rows that start 16-byte aligned on both sides) or elements.
  add("vectorised: 8-byte elements, even x offset, aligned rows",
      make_array(64, 4, 2, "xyz"), make_array(64, 4, 2, "xyz"),
      make_box(0, 64, 0, 4, 0, 2), E::Yes, 8);
  add("vectorised with a tail: 8-byte elements, rows of 67",
      make_array(68, 3, 2, "xyz").padded(2, 0, 0), make_array(67, 3, 2, "xyz").padded(3, 0, 0),
      make_box(0, 67, 0, 3, 0, 2), E::Yes, 8);
  add("misaligned source: 8-byte elements, odd x offset",
      make_array(70, 3, 2, "xyz"), make_array(64, 3, 2, "xyz").at(1, 0, 0),
      make_box(1, 65, 0, 3, 0, 2), E::Yes, 8);
  add("misaligned destination: 8-byte elements, start shifted by one element",
      make_array(64, 3, 2, "xyz"), make_array(64, 3, 2, "xyz").shifted(1),
      make_box(0, 64, 0, 3, 0, 2), E::Yes, 8);
  add("misaligned both alike: 8-byte elements, both starts shifted by one element",
      make_array(64, 3, 2, "xyz").shifted(1), make_array(64, 3, 2, "xyz").shifted(1),
      make_box(0, 64, 0, 3, 0, 2), E::Yes, 8);
  add("misaligned: 4-byte elements, x offset 2 (8 bytes)",
      make_array(64, 3, 2, "xyz"), make_array(64, 3, 2, "xyz"),
      make_box(2, 62, 0, 3, 0, 2), E::Yes, 4);
  add("vectorised: 4-byte elements, rows of 37 (a tail of 1)",
      make_array(40, 3, 2, "xyz"), make_array(44, 3, 2, "xyz"),
      make_box(0, 37, 0, 3, 0, 2), E::Yes, 4);
  add("alternately aligned rows: 4-byte elements, a row pitch of 33",
      make_array(33, 8, 2, "xyz"), make_array(33, 8, 2, "xyz").padded(3, 0, 0),
      make_box(0, 33, 0, 8, 0, 2), E::Yes, 4);
  add("16-byte elements, odd x offset", make_array(50, 3, 2, "xyz"),
      make_array(50, 3, 2, "xyz").shifted(1), make_box(1, 48, 0, 3, 0, 2), E::Yes, 16);

  // Contiguous runs, single elements, empty boxes, slice gaps.
  add("one contiguous run: whole slices", make_array(40, 30, 5, "xyz"),
      make_array(40, 30, 5, "xyz").at(0, 0, -2), make_box(0, 40, 0, 30, 1, 3), E::Yes);
  add("one contiguous run: part of a row", make_array(70, 3, 3, "xyz"),
      make_array(70, 3, 3, "xyz"), make_box(5, 69, 1, 2, 2, 3), E::Yes);
  add("part of a row, orders differ along axes the box does not extend along",
      make_array(70, 3, 3, "xyz"), make_array(70, 3, 3, "xzy"),
      make_box(5, 69, 1, 2, 2, 3), E::Yes);
  add("one element, orders differ", make_array(5, 6, 7, "zyx").at(-3, 0, 0),
      make_array(6, 7, 5, "yxz").shifted(3), make_box(1, 2, 4, 5, 3, 4), E::Yes);
  add("empty box (hi == lo along y)", make_array(40, 10, 3, "xyz"), make_array(40, 10, 3, "yxz"),
      make_box(0, 40, 4, 4, 0, 3), E::Yes);
  add("slice pitch not whole rows, box not whole rows (no 3D copy)",
      make_array(40, 10, 4, "xyz").slice_gap(3), make_array(40, 10, 4, "xyz").slice_gap(5),
      make_box(0, 39, 0, 10, 0, 4), E::No);
  add("slice pitch not whole rows, box of whole slices (rows merge: a 2D copy)",
      make_array(40, 10, 4, "xyz").slice_gap(3), make_array(40, 10, 4, "xyz").slice_gap(5),
      make_box(0, 40, 0, 10, 0, 4), E::Yes);
  add("slice pitch not whole rows, box within one slice (a 2D copy)",
      make_array(40, 10, 4, "xyz").slice_gap(3), make_array(40, 10, 4, "xyz").slice_gap(5),
      make_box(0, 39, 0, 10, 2, 3), E::Yes);
  return v;
}

// Boxes that need more blocks than one launch gets (8192 for rows and tiles, 4096 for the
// thread-per-element kernel): the kernels' grid-stride loops. GPU only (large).
std::vector<Case> large_cases() {
  std::vector<Case> v;
  for (size_t e : kElemSizes) {
    v.push_back({"large: rows over more than 8192 blocks", make_array(32, 256, 300, "xyz"),
                 make_array(32, 256, 300, "xyz"), make_box(0, 32, 0, 256, 0, 300), e});
    v.push_back({"large: tiles over more than 8192 blocks", make_array(40, 40, 2100, "xyz"),
                 make_array(40, 40, 2100, "yxz"), make_box(0, 40, 0, 40, 0, 2100), e});
    v.push_back({"large: short rows over more than 4096 blocks", make_array(8, 400, 400, "xyz"),
                 make_array(9, 400, 400, "xyz"), make_box(0, 8, 0, 400, 0, 400), e});
  }
  return v;
}

// ---------------------------------------------------------------------------------------
// Random cases

// An extent in [1, max], often 1 or near a multiple of the 32-element tile.
int64_t pick_extent(Rng& rng, int64_t max) {
  switch (uniform(rng, 0, 9)) {
    case 0: return 1;
    case 1: return std::min<int64_t>(max, 32 * uniform(rng, 1, 2));
    case 2: return std::clamp<int64_t>(32 * uniform(rng, 1, 2) + uniform(rng, -1, 1), 1, max);
    default: return uniform(rng, 1, max);
  }
}

// A memory order with `fastest` first (any where -1).
void pick_order(Rng& rng, int fastest, int order[3]) {
  std::iota(order, order + 3, 0);
  std::shuffle(order, order + 3, rng);
  if (fastest >= 0) std::swap(order[0], *std::find(order, order + 3, fastest));
}

// An array of extents `ext` around the box: its origin puts the box at a random place
// inside; padding, a slice gap and a shifted start at random.
Array random_array(Rng& rng, const int64_t ext[3], const Box& b, int fastest) {
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
Case random_case(Rng& rng, int64_t max, size_t elem, int src_fastest = -1, int dst_fastest = -1,
                 bool empty = false) {
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

size_t random_elem(Rng& rng) { return kElemSizes[uniform(rng, 0, 2)]; }

// What copy_box_ce must return on GPUs by rma.h's contract, where it can be told simply: a
// box of one element, or whose axes (those of extent > 1) both layouts walk in the same
// order, the first with unit stride, with no slice gaps: true; where the orders differ, or
// the first axis is not of unit stride: false. Either where slice gaps decide.
CeExpect ce_contract(const Case& c) {
  auto walked = [&](const Array& a) {
    std::vector<int> axes;
    for (int i = 0; i < 3; ++i)
      if (c.box.n(a.order[i]) > 1) axes.push_back(a.order[i]);
    return axes;
  };
  for (int a = 0; a < 3; ++a)
    if (c.box.n(a) <= 0) return CeExpect::Yes;  // nothing to copy
  const std::vector<int> s = walked(c.src), d = walked(c.dst);
  if (s.empty()) return CeExpect::Yes;
  if (s != d) return CeExpect::No;
  if (c.src.layout().stride[s[0]] != 1 || c.dst.layout().stride[s[0]] != 1) return CeExpect::No;
  if (c.src.slice_extra == 0 && c.dst.slice_extra == 0) return CeExpect::Yes;
  return CeExpect::Either;
}

const char* ce_str(CeExpect e) {
  return e == CeExpect::Yes ? "true" : e == CeExpect::No ? "false" : "either";
}

// ---------------------------------------------------------------------------------------
// The tests' bodies, shared by the host and the GPU fixtures

void test_directed_kernels(Space& space) {
  Rng rng(test_seed());
  FailureBudget budget;
  for (const Case& c : directed_cases())
    if (budget.exhausted(run_case(space, c, Via::Kernels, rng).ok)) return;
}

void test_large(Space& space) {
  Rng rng(test_seed());
  FailureBudget budget;
  for (const Case& c : large_cases())
    if (budget.exhausted(run_case(space, c, Via::Kernels, rng).ok)) return;
}

void test_random_kernels(Space& space, int cases) {
  Rng rng(test_seed());
  FailureBudget budget;
  for (int i = 0; i < cases; ++i) {
    Case c = random_case(rng, 70, kElemSizes[i % 3]);
    c.label = "random case " + std::to_string(i);
    if (budget.exhausted(run_case(space, c, Via::Kernels, rng).ok)) return;
  }
}

// copy_box_ce: exact where it returns true, nothing written where false; on GPUs, what it
// returns as the case says (the host backend always copies and returns true).
void check_ce_result(Space& space, const Case& c, bool issued, CeExpect expect) {
  if (!space.gpu()) expect = CeExpect::Yes;
  if (expect == CeExpect::Either) return;
  EXPECT_EQ(issued, expect == CeExpect::Yes)
      << "copy_box_ce returned " << issued << ", expected " << ce_str(expect) << ": " << c.str();
}

void test_directed_ce(Space& space) {
  Rng rng(test_seed());
  FailureBudget budget;
  for (const Case& c : directed_cases()) {
    const Outcome out = run_case(space, c, Via::CopyEngine, rng);
    check_ce_result(space, c, out.issued, c.ce);
    if (c.ce != CeExpect::Either) {  // the directed expectation agrees with the contract
      const CeExpect contract = ce_contract(c);
      EXPECT_TRUE(contract == CeExpect::Either || contract == c.ce)
          << "test bug: ce_contract says " << ce_str(contract) << " for " << c.str();
    }
    if (budget.exhausted(out.ok)) return;
  }
}

void test_random_ce(Space& space, int cases) {
  Rng rng(test_seed());
  FailureBudget budget;
  int issued = 0;
  for (int i = 0; i < cases; ++i) {
    Case c = random_case(rng, 70, kElemSizes[i % 3]);
    if (chance(rng, 60)) {  // same memory order: mostly what the copy engines can take
      std::copy(c.src.order, c.src.order + 3, c.dst.order);
      if (chance(rng, 50)) c.src.slice_extra = c.dst.slice_extra = 0;
    }
    c.label = "random ce case " + std::to_string(i);
    const Outcome out = run_case(space, c, Via::CopyEngine, rng);
    check_ce_result(space, c, out.issued, ce_contract(c));
    issued += out.issued;
    if (budget.exhausted(out.ok)) return;
  }
  std::printf("copy_box_ce: %d of %d random cases issued\n", issued, cases);
  EXPECT_GT(issued, cases / 10) << "the random cases hardly reach the copy engines";
  if (space.gpu()) {
    EXPECT_LT(issued, cases - cases / 10) << "the random cases hardly decline";
  }
}

// copy_boxes: every box of the batch its own source and destination array, at disjoint
// places of one source and one destination allocation (guards between them).
enum class Kind { Rows, Tiles, Any, Empty };

Case kind_case(Rng& rng, Kind kind, size_t elem) {
  constexpr int64_t kMax = 40;
  const int f = static_cast<int>(uniform(rng, 0, 2));
  const int g = (f + static_cast<int>(uniform(rng, 1, 2))) % 3;
  switch (kind) {
    case Kind::Rows: return random_case(rng, kMax, elem, f, f);
    case Kind::Tiles: return random_case(rng, kMax, elem, f, g);
    case Kind::Any: return random_case(rng, kMax, elem);
    case Kind::Empty: break;
  }
  return random_case(rng, kMax, elem, -1, -1, true);
}

const char* kind_str(Kind k) {
  return k == Kind::Rows ? "rows" : k == Kind::Tiles ? "tiles" : k == Kind::Any ? "any" : "empty";
}

bool run_batch(Space& space, const std::vector<Kind>& kinds, Rng& rng, const std::string& label) {
  const size_t elem = random_elem(rng);
  std::vector<Case> cases;
  std::vector<size_t> soff, doff;  // each array's allocation within the shared ones
  size_t sbytes = 0, dbytes = 0;
  for (size_t i = 0; i < kinds.size(); ++i) {
    cases.push_back(kind_case(rng, kinds[i], elem));
    cases.back().label = label + ", box " + std::to_string(i) + " (" + kind_str(kinds[i]) + ")";
    check_case(cases.back());
    soff.push_back(sbytes);
    doff.push_back(dbytes);
    sbytes += cases.back().src.alloc_bytes(elem);
    dbytes += cases.back().dst.alloc_bytes(elem);
  }
  const Bytes src = random_bytes(rng, sbytes);
  const Bytes before = poison(dbytes);
  Buffer s(space, src), d(space, before);
  std::vector<BoxCopy> copies;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    BoxCopy b{};
    b.dst = d.data() + doff[i] + static_cast<size_t>(c.dst.shift) * elem;
    b.dl = c.dst.layout();
    b.src = s.data() + soff[i] + static_cast<size_t>(c.src.shift) * elem;
    b.sl = c.src.layout();
    std::copy(c.box.lo, c.box.lo + 3, b.lo);
    std::copy(c.box.hi, c.box.hi + 3, b.hi);
    copies.push_back(b);
  }
  space.rma().copy_boxes(copies, elem, space.stream());
  space.finish();
  const Bytes got = d.read();
  bool ok = true;
  for (size_t i = 0; i < cases.size(); ++i) {  // each box's destination allocation apart
    const Case& c = cases[i];
    const size_t n = c.dst.alloc_bytes(elem);
    Bytes want(before.begin() + doff[i], before.begin() + doff[i] + n);
    Bytes in_src(src.begin() + soff[i], src.begin() + soff[i] + c.src.alloc_bytes(elem));
    reference_copy(want, c.dst, in_src, c.src, c.box, elem);
    const auto same = same_bytes(Bytes(got.begin() + doff[i], got.begin() + doff[i] + n), want,
                                 c.dst, c.box, elem);
    EXPECT_TRUE(same) << "copy_boxes of " << cases.size() << " boxes, destination of " << c.str();
    ok = ok && same;
  }
  const bool src_ok = s.read() == src;
  EXPECT_TRUE(src_ok) << label << ": copy_boxes changed a source";
  return ok && src_ok;
}

void test_batches(Space& space, int random_batches) {
  Rng rng(test_seed());
  FailureBudget budget;
  // Sizes around the 16 boxes of a launch, the kinds alternating (both kernels in a batch,
  // more than 16 of a kind in the largest), then one kind only, then random batches.
  for (int count : {1, 2, 15, 16, 17, 31, 32, 33, 40}) {
    std::vector<Kind> kinds;
    for (int i = 0; i < count; ++i) kinds.push_back(i % 2 ? Kind::Tiles : Kind::Rows);
    const std::string label = "alternating batch of " + std::to_string(count);
    if (budget.exhausted(run_batch(space, kinds, rng, label))) return;
  }
  for (Kind k : {Kind::Rows, Kind::Tiles})
    if (budget.exhausted(run_batch(space, std::vector<Kind>(33, k), rng,
                                   std::string("batch of 33 ") + kind_str(k))))
      return;
  for (int b = 0; b < random_batches; ++b) {
    std::vector<Kind> kinds(static_cast<size_t>(uniform(rng, 1, 40)));
    for (Kind& k : kinds) k = static_cast<Kind>(uniform(rng, 0, 9) < 9 ? uniform(rng, 0, 2) : 3);
    if (budget.exhausted(run_batch(space, kinds, rng, "random batch " + std::to_string(b))))
      return;
  }
}

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

// The host backend: the reference, the cases and the checks themselves, everywhere.
TEST_F(HostBoxCopy, DirectedCases) { test_directed_kernels(*space_); }
TEST_F(HostBoxCopy, RandomCases) { test_random_kernels(*space_, 150); }
TEST_F(HostBoxCopy, CopyEngineDirectedCases) { test_directed_ce(*space_); }
TEST_F(HostBoxCopy, CopyEngineRandomCases) { test_random_ce(*space_, 60); }
TEST_F(HostBoxCopy, Batches) { test_batches(*space_, 10); }

// The cuda backend on GPU 0.
TEST_F(GpuBoxCopy, DirectedCases) { test_directed_kernels(*space_); }
TEST_F(GpuBoxCopy, LargeCases) { test_large(*space_); }
TEST_F(GpuBoxCopy, RandomCases) { test_random_kernels(*space_, 900); }
TEST_F(GpuBoxCopy, CopyEngineDirectedCases) { test_directed_ce(*space_); }
TEST_F(GpuBoxCopy, CopyEngineRandomCases) { test_random_ce(*space_, 600); }
TEST_F(GpuBoxCopy, Batches) { test_batches(*space_, 60); }

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::printf("box_copy_test: base seed %llu (BOX_COPY_SEED=<n> changes it)\n",
              static_cast<unsigned long long>(base_seed()));
  const int rc = RUN_ALL_TESTS();
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  if (rc == 0 && u.test_to_run_count() > 0 && u.skipped_test_count() == u.test_to_run_count()) {
    std::printf("SKIP: every test that ran was skipped\n");
    return 77;  // ctest's SKIP_RETURN_CODE
  }
  return rc;
}
