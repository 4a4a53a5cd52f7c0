// The device API's addresses and teams from kernels: ptr() against symcommPtr, a team that
// is not the world, and team translation on 2D teams, each team's barrier included (the
// Device fixture is in device_fixture.cuh).
#include <string>
#include <vector>

#include "device_fixture.cuh"

namespace device_test {

// ---------------------------------------------------------------------------------------
// 7. Addresses and team ranks
// ---------------------------------------------------------------------------------------
// Offsets into an allocation: its start, unaligned, and near its end.
__host__ __device__ size_t offset_at(int j) {
  const size_t offsets[] = {0, 1, 255, 4095};
  return offsets[j];
}

// out[pe * 4 + j] = ptr(c, p + offset_at(j), pe); ints = {team_rank, team_size,
// world_rank(0), world_rank(1), ...}.
__global__ void addr_kernel(DeviceComm c, char* p, void** out, int* ints) {
  const int n = symcomm::team_size(c);
  ints[0] = symcomm::team_rank(c);
  ints[1] = n;
  for (int pe = 0; pe < n; ++pe) {
    for (int j = 0; j < 4; ++j) out[pe * 4 + j] = symcomm::ptr(c, p + offset_at(j), pe);
    ints[2 + pe] = symcomm::world_rank(c, pe);
  }
}

// ints: {team_rank, team_size}, then for each team rank pe: world_rank(c, pe),
// team_rank_of(c, that world rank), team_translate(c, pe, other); then team_translate of the
// out-of-range pes -1 and team_size; then team_rank_of(c, w) for every world rank w.
__global__ void translate_kernel(DeviceComm c, DeviceComm other, int nranks, int* ints) {
  const int n = symcomm::team_size(c);
  ints[0] = symcomm::team_rank(c);
  ints[1] = n;
  for (int pe = 0; pe < n; ++pe) {
    const int w = symcomm::world_rank(c, pe);
    ints[2 + 3 * pe] = w;
    ints[3 + 3 * pe] = symcomm::team_rank_of(c, w);
    ints[4 + 3 * pe] = symcomm::team_translate(c, pe, other);
  }
  int* rest = ints + 2 + 3 * n;
  rest[0] = symcomm::team_translate(c, -1, other);
  rest[1] = symcomm::team_translate(c, n, other);
  for (int w = 0; w < nranks; ++w) rest[2 + w] = symcomm::team_rank_of(c, w);
}

TEST_F(Device, PtrMatchesSymcommPtr) {
  char* p = symmetric<char>(4096);
  void** out = plain<void*>(4 * static_cast<size_t>(n_));
  int* ints = plain<int>(2 + static_cast<size_t>(n_));
  ASSERT_TRUE(p && out && ints);
  CUDA_OK(cudaMemset(out, kPoison, 4 * n_ * sizeof(void*)));
  CUDA_OK(cudaMemset(ints, kPoison, (2 + n_) * sizeof(int)));
  addr_kernel<<<1, 1>>>(h_, p, out, ints);
  LAUNCH_OK();
  std::vector<void*> got(4 * static_cast<size_t>(n_));
  std::vector<int> got_ints(2 + static_cast<size_t>(n_));
  CUDA_OK(cudaMemcpy(got.data(), out, got.size() * sizeof(void*), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(got_ints.data(), ints, got_ints.size() * sizeof(int),
                     cudaMemcpyDeviceToHost));
  EXPECT_EQ(got_ints[0], me_);
  EXPECT_EQ(got_ints[1], n_);
  for (int pe = 0; pe < n_; ++pe) {
    EXPECT_EQ(got_ints[2 + pe], pe);
    for (int j = 0; j < 4; ++j) {
      void* want = symcommPtr(comm_, p + offset_at(j), pe);
      // NULL only where a member is on another node (reached through the ring: the handle
      // has one); ptr() says the same.
      if (h_.net.slots == nullptr || pe == me_) EXPECT_NE(want, nullptr) << symcommGetLastError();
      EXPECT_EQ(got[pe * 4 + j], want) << "pe " << pe << " offset " << offset_at(j);
    }
  }
  EXPECT_EQ(got[me_ * 4], static_cast<void*>(p)) << "ptr to myself is the address itself";
}

// Team ranks everywhere: world ranks 1, 3, 5, ... as a team of n / 2.
TEST_F(Device, StridedTeam) {
  char* p = symmetric<char>(4096);
  ASSERT_NE(p, nullptr);
  const int size = n_ / 2;
  symcommTeam_t team = SYMCOMM_TEAM_INVALID;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 1, 2, size, &team));
  const bool member = me_ % 2 == 1;
  ASSERT_EQ(team != SYMCOMM_TEAM_INVALID, member);
  DeviceComm t{};
  if (member) {
    SC_OK(symcommGetDeviceComm(comm_, team, &t));
    void** out = plain<void*>(4 * static_cast<size_t>(size));
    int* ints = plain<int>(2 + static_cast<size_t>(size));
    ASSERT_TRUE(out && ints);
    CUDA_OK(cudaMemset(out, kPoison, 4 * size * sizeof(void*)));
    CUDA_OK(cudaMemset(ints, kPoison, (2 + size) * sizeof(int)));
    addr_kernel<<<1, 1>>>(t, p, out, ints);
    LAUNCH_OK();
    std::vector<void*> got(4 * static_cast<size_t>(size));
    std::vector<int> got_ints(2 + static_cast<size_t>(size));
    CUDA_OK(cudaMemcpy(got.data(), out, got.size() * sizeof(void*), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got_ints.data(), ints, got_ints.size() * sizeof(int),
                       cudaMemcpyDeviceToHost));
    EXPECT_EQ(got_ints[0], (me_ - 1) / 2);
    EXPECT_EQ(got_ints[1], size);
    for (int pe = 0; pe < size; ++pe) {
      EXPECT_EQ(got_ints[2 + pe], 1 + 2 * pe);
      for (int j = 0; j < 4; ++j)
        EXPECT_EQ(got[pe * 4 + j], symcommPtr(comm_, p + offset_at(j), 1 + 2 * pe))
            << "team rank " << pe << " offset " << offset_at(j);
    }
  }
  // The team's barrier, run by its members; every rank takes part in the host calls.
  ASSERT_NO_FATAL_FAILURE(run_barriers(member ? &t : nullptr, 32, 100));
}

// Device handles of the rows and columns of a 2D split (rows of 2): ranks, world ranks and
// translations on the device agree with the host's, and each team's barrier works.
TEST_F(Device, TwoDimensionalTeams) {
  symcommTeam_t row = SYMCOMM_TEAM_INVALID, col = SYMCOMM_TEAM_INVALID;
  SC_OK(symcommTeamSplit2D(comm_, SYMCOMM_TEAM_WORLD, 2, &row, &col));
  DeviceComm rh{}, ch{};
  SC_OK(symcommGetDeviceComm(comm_, row, &rh));
  SC_OK(symcommGetDeviceComm(comm_, col, &ch));
  int* ints = plain<int>(4 + 4 * static_cast<size_t>(n_));
  ASSERT_NE(ints, nullptr);
  for (int which = 0; which < 2; ++which) {
    const symcommTeam_t team = which == 0 ? row : col, other = which == 0 ? col : row;
    const DeviceComm& t = which == 0 ? rh : ch;
    SCOPED_TRACE(which == 0 ? "row" : "column");
    int rank = -2, size = -2;
    SC_OK(symcommTeamRank(comm_, team, &rank));
    SC_OK(symcommTeamSize(comm_, team, &size));
    CUDA_OK(cudaMemset(ints, kPoison, (4 + 4 * n_) * sizeof(int)));
    translate_kernel<<<1, 1>>>(t, which == 0 ? ch : rh, n_, ints);
    LAUNCH_OK();
    std::vector<int> got(4 + 4 * static_cast<size_t>(n_));
    CUDA_OK(cudaMemcpy(got.data(), ints, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT_EQ(got[0], rank);
    EXPECT_EQ(got[1], size);
    for (int pe = 0; pe < size; ++pe) {
      int world = -2, there = -2;
      SC_OK(symcommTeamTranslate(comm_, team, pe, SYMCOMM_TEAM_WORLD, &world));
      SC_OK(symcommTeamTranslate(comm_, team, pe, other, &there));
      EXPECT_EQ(got[2 + 3 * pe], world) << "world_rank of " << pe;
      EXPECT_EQ(got[3 + 3 * pe], pe) << "team_rank_of(world_rank(" << pe << "))";
      EXPECT_EQ(got[4 + 3 * pe], there) << "team_translate of " << pe;
    }
    const int* rest = &got[2 + 3 * static_cast<size_t>(size)];
    EXPECT_EQ(rest[0], -1) << "team_translate of pe -1";
    EXPECT_EQ(rest[1], -1) << "team_translate of pe team_size";
    for (int w = 0; w < n_; ++w) {
      int want = -2;
      SC_OK(symcommTeamTranslate(comm_, SYMCOMM_TEAM_WORLD, w, team, &want));
      EXPECT_EQ(rest[2 + w], want) << "team_rank_of world rank " << w;
    }
    ASSERT_NO_FATAL_FAILURE(run_barriers(&t, 32, 100));
  }
  SC_OK(symcommTeamDestroy(comm_, row));
  SC_OK(symcommTeamDestroy(comm_, col));
}

}  // namespace device_test
