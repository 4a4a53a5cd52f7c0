// Local copies in the host memory space: CPU loops and memcpy, complete when the call
// returns; the barriers of copy_boxes_between_barriers are the host backend's.
#include <cstring>

#include "copy/copies.h"
#include "copy/reduce.h"

namespace symcomm {

namespace {

class HostCopies final : public Copies {
 public:
  explicit HostCopies(RmaBackend& rma) : rma_(rma) {}

  void reduce(void* dst, const void* src, size_t stride, int n, size_t count,
              symcommDataType_t type, symcommRedOp_t op, symcommStream_t) override {
    with_type(type, [&](auto zero) {
      using T = decltype(zero);
      for (size_t i = 0; i < count; ++i)
        reduce_one(static_cast<T*>(dst), static_cast<const char*>(src), stride, n, i, op);
    });
  }

  void divide(void* v, size_t count, symcommDataType_t type, int n, symcommStream_t) override {
    with_type(type, [&](auto zero) {
      using T = decltype(zero);
      for (size_t i = 0; i < count; ++i) divide_one(static_cast<T*>(v), i, n);
    });
  }

  void scale(void* dst, const void* src, size_t count, symcommDataType_t type, uint64_t factor,
             const void* factor_device, symcommStream_t) override {
    with_type(type, [&](auto zero) {
      using T = decltype(zero);
      T f;
      std::memcpy(&f, factor_device ? factor_device : &factor, sizeof f);
      for (size_t i = 0; i < count; ++i)
        scale_one(static_cast<T*>(dst), static_cast<const T*>(src), i, f);
    });
  }

  bool copy_box_ce(void* dst, const BoxLayout& dl, const void* src, const BoxLayout& sl,
                   const int64_t lo[3], const int64_t hi[3], size_t elem,
                   symcommStream_t stream) override {
    copy_box(dst, dl, src, sl, lo, hi, elem, stream);
    return true;
  }

  void copy_box(void* dst, const BoxLayout& dl, const void* src, const BoxLayout& sl,
                const int64_t lo[3], const int64_t hi[3], size_t elem, symcommStream_t) override {
    auto* d = static_cast<char*>(dst);
    auto* s = static_cast<const char*>(src);
    for (int64_t z = lo[2]; z < hi[2]; ++z)
      for (int64_t y = lo[1]; y < hi[1]; ++y)
        for (int64_t x = lo[0]; x < hi[0]; ++x)
          std::memcpy(d + dl.offset(x, y, z) * static_cast<int64_t>(elem),
                      s + sl.offset(x, y, z) * static_cast<int64_t>(elem), elem);
  }

  void copy_boxes_between_barriers(const BarrierArgs& args, const std::vector<BoxCopy>& copies,
                                   size_t elem, symcommStream_t stream) override {
    rma_.barrier(args, stream);
    copy_boxes(copies, elem, stream);
    rma_.barrier(args, stream);
  }

 private:
  RmaBackend& rma_;
};

}  // namespace

std::unique_ptr<Copies> make_host_copies(RmaBackend& rma) {
  return std::make_unique<HostCopies>(rma);
}

}  // namespace symcomm
