// A pencil decomposition: its geometry, the row and column teams of its process grid, the
// backend that runs its transposes and the one that runs its halo exchanges (often the
// same); made directly or by autotuning.
#pragma once

#include <memory>

#include "bootstrap/bootstrap.h"
#include "decomp/backend.h"

namespace symcomm {

struct DecompLayers {
  Bootstrap& bootstrap;
  const Topology& topology;
  Heap& heap;
  Rma& rma;
  Copies& copies;
  NcclComms* nccl = nullptr;  // the communicator's NCCL communicators (the nccl backends')
  const Registrations* registrations = nullptr;  // its registered buffers (symcommRegister)
};

class Decomp {
 public:
  // Collective: the configuration (pdims and backends given, not "auto") is checked to be
  // the same on every rank.
  static std::unique_ptr<Decomp> create(const DecompLayers& layers,
                                        const symcommDecompConfig_t& config);
  // Collective: autotunes what `config` leaves open (pdims 0 x 0, backend or halo_backend
  // "auto"); autotune.cc.
  static std::unique_ptr<Decomp> autotune(const DecompLayers& layers,
                                          const symcommDecompConfig_t& config);
  ~Decomp();
  // The communicator is going away: forget its teams instead of destroying them, and let go
  // of the backend's state (resources of the communicator's device).
  void detach() {
    row_team_ = col_team_ = SYMCOMM_TEAM_INVALID;
    state_.reset();
    halo_state_.reset();
  }

  const Geometry& geometry() const { return geometry_; }
  DecompBackend& backend() const { return *backend_; }
  DecompBackend& halo_backend() const { return *halo_backend_; }
  // What backend() and halo_backend() are called with (each with its own state).
  DecompContext context() const { return context_with(state_.get()); }
  DecompContext halo_context() const {
    return context_with(halo_state_ ? halo_state_.get() : state_.get());
  }
  // The configuration in force (the chosen pdims and backends).
  symcommDecompConfig_t config() const;
  int rank() const { return layers_.topology.rank; }
  // What this rank's exchanges handed to the transports so far (symcommDecompGetTraffic).
  const DecompTraffic& traffic() const { return *traffic_; }

 private:
  Decomp(const DecompLayers& layers, const symcommDecompConfig_t& config);
  DecompContext context_with(DecompState* state) const;

  DecompLayers layers_;
  Geometry geometry_;
  symcommTeam_t row_team_ = SYMCOMM_TEAM_INVALID;
  symcommTeam_t col_team_ = SYMCOMM_TEAM_INVALID;
  DecompBackend* backend_ = nullptr;
  DecompBackend* halo_backend_ = nullptr;
  std::unique_ptr<DecompState> state_;       // backend_->make_state()
  std::unique_ptr<DecompState> halo_state_;  // halo_backend_->make_state(), if another backend
  std::unique_ptr<DecompTraffic> traffic_ = std::make_unique<DecompTraffic>();
};

// Collective: every rank passed the same configuration (throws symcommInvalidUsage naming
// a rank whose configuration differs).
void require_same_config(const DecompLayers& layers, const symcommDecompConfig_t& config);

}  // namespace symcomm
