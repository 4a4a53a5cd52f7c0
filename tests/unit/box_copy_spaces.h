// Where the box copy tests' arrays live and which copies copy them (box_copy_fixture.h has
// the overview): the host space, and GPU 0 with the cuda backend; buffers of a space.
#pragma once

#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "base/cuda_driver.h"
#include "box_copy_cases.h"
#include "copy/copies.h"
#include "rma/rma.h"
#include "topology/topology.h"

namespace box_copy_test {

using symcomm::Copies;
using symcomm::RmaBackend;

// ---------------------------------------------------------------------------------------
// CUDA errors

inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  std::ostringstream m;
  m << file << ":" << line << ": " << call << " failed: " << cudaGetErrorName(e) << ": "
    << cudaGetErrorString(e);
  throw std::runtime_error(m.str());  // gtest reports it as the test's failure
}
#define CHECK_CUDA(call) check_cuda((call), #call, __FILE__, __LINE__)

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

}  // namespace box_copy_test
