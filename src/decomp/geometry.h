// Pencil geometry: pure arithmetic on the process grid and the global dimensions, the same
// on every rank (so that every rank can compute every other rank's pencil).
#pragma once

#include <array>
#include <cstdint>

#include "symcomm/decomp.h"

namespace symcomm {

struct Range {
  int64_t start;
  int64_t count;
};
// Part k of n points split over p parts (the first n % p parts hold one point more).
Range split(int64_t n, int p, int k);

// Throws symcommInvalidArgument where `config` was not made by symcommDecompConfigInit of
// this library's header: no other field may be read before this check.
void require_initialised(const symcommDecompConfig_t& config);

class Geometry {
 public:
  // Checks the configuration against `nranks` (throws symcommInvalidArgument).
  Geometry(const symcommDecompConfig_t& config, int nranks);
  int row_of(int rank) const;
  int col_of(int rank) const;
  int rank_at(int row, int col) const;
  // The pencil of `axis` held by `rank`. Refuses negative halos and paddings, and pencils
  // whose byte size could overflow (more than kMaxPoints points); `prefix` names the
  // arguments in messages ("in_" for in_halo and in_padding).
  symcommPencilInfo_t pencil(int rank, int axis, const int64_t* halo, const int64_t* padding,
                             const char* prefix = "") const;

  // The most points of a grid or pencil (2^55): their bytes (16 per point at most) fit in
  // int64_t with room for workspaces of several pencils or slabs.
  static constexpr int64_t kMaxPoints = INT64_MAX / 256;
  const symcommDecompConfig_t& config() const { return config_; }

 private:
  symcommDecompConfig_t config_;
};

}  // namespace symcomm
