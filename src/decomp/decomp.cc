#include "decomp/decomp.h"

#include <cstring>

#include "base/error.h"

namespace symcomm {

namespace {

std::string field(const char* text, size_t size) { return std::string(text, strnlen(text, size)); }

// The backend named `wanted`, or ("") the first registered that can run; throws where none
// can, a registered one asked for by name saying why.
DecompBackend* pick_backend(const std::string& wanted, const DecompContext& ctx) {
  for (DecompBackend* b : decomp_backends())
    if (wanted.empty() ? chosen_unasked(*b, ctx.heap) && b->can_implement(ctx)
                       : wanted == b->name() && b->can_implement(ctx))
      return b;
  for (DecompBackend* b : decomp_backends())
    if (wanted == b->name()) {
      SYMCOMM_THROW(symcommNotSupported,
                    "no decomposition backend named %s can run on this communicator: %s",
                    wanted.c_str(), b->can_implement(ctx).reason().c_str());
    }
  SYMCOMM_REQUIRE(wanted.empty(), symcommInvalidArgument,
                  "no decomposition backend named %s can run: no backend has that name",
                  wanted.c_str());
  std::string reasons;
  for (DecompBackend* b : decomp_backends()) {
    const Verdict v = b->can_implement(ctx);
    reasons += format("\n  %s: %s", b->name(),
                      !v ? v.reason().c_str()
                         : "it is meant for ranks out of load/store reach, and every rank is "
                           "mapped here (name it to use it)");
  }
  SYMCOMM_THROW(symcommNotSupported, "no decomposition backend can run on this communicator:%s",
                reasons.c_str());
}

// The first field in which two configurations differ ("" for none), by value: names up to
// their NUL (what follows it is not read), doubles as numbers (-0.0 is 0.0).
std::string differing_field(const symcommDecompConfig_t& x, const symcommDecompConfig_t& y) {
  auto same = [](const auto& a, const auto& b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  auto same_name = [](const char* a, const char* b, size_t n) { return std::strncmp(a, b, n) == 0; };
  auto same_doubles = [](const double* a, const double* b, int n) {
    for (int i = 0; i < n; ++i)
      if (!(a[i] == b[i]) && !(a[i] != a[i] && b[i] != b[i])) return false;  // NaN = NaN
    return true;
  };
#define SYMCOMM_FIELD(f) \
  if (!same(x.f, y.f)) return #f
#define SYMCOMM_NAME(f) \
  if (!same_name(x.f, y.f, sizeof x.f)) return #f
  SYMCOMM_FIELD(struct_size);
  SYMCOMM_FIELD(magic);
  SYMCOMM_FIELD(gdims);
  SYMCOMM_FIELD(pdims);
  SYMCOMM_FIELD(rank_order);
  SYMCOMM_FIELD(axis_contiguous);
  SYMCOMM_NAME(backend);
  SYMCOMM_FIELD(autotune_type);
  SYMCOMM_FIELD(autotune_warmup);
  SYMCOMM_FIELD(autotune_trials);
  if (!same_doubles(x.autotune_weights, y.autotune_weights, 4)) return "autotune_weights";
  if (!same_doubles(&x.autotune_skip, &y.autotune_skip, 1)) return "autotune_skip";
  SYMCOMM_NAME(halo_backend);
  SYMCOMM_NAME(autotune_grids);
  SYMCOMM_NAME(autotune_backends);
  SYMCOMM_FIELD(autotune_allow_uneven);
  SYMCOMM_FIELD(autotune_halo_axis);
  SYMCOMM_FIELD(autotune_halo_extents);
  SYMCOMM_FIELD(autotune_halo_periods);
#undef SYMCOMM_FIELD
#undef SYMCOMM_NAME
  return "";
}

}  // namespace

void require_same_config(const DecompLayers& layers, const symcommDecompConfig_t& config) {
  std::vector<symcommDecompConfig_t> all(static_cast<size_t>(layers.topology.nranks));
  layers.bootstrap.allgather(&config, sizeof config, all.data());
  for (int r = 0; r < layers.topology.nranks; ++r) {
    const std::string field = differing_field(all[static_cast<size_t>(r)], config);
    SYMCOMM_REQUIRE(field.empty(), symcommInvalidUsage,
                    "symcommDecompCreate is collective with the same configuration on every "
                    "rank: rank %d's %s differs from this rank's", r, field.c_str());
  }
}

Decomp::Decomp(const DecompLayers& layers, const symcommDecompConfig_t& config)
    : layers_(layers), geometry_(config, layers.topology.nranks) {}

std::unique_ptr<Decomp> Decomp::create(const DecompLayers& layers,
                                       const symcommDecompConfig_t& config) {
  std::unique_ptr<Decomp> d;
  layers.bootstrap.agree_on([&] { d.reset(new Decomp(layers, config)); });
  require_same_config(layers, config);
  // Rows and columns as teams, for the barriers of the exchanges.
  const bool row_major = config.rank_order == symcommRowMajor;
  auto [x, y] = layers.rma.split_2d(SYMCOMM_TEAM_WORLD,
                                    row_major ? config.pdims[1] : config.pdims[0]);
  d->row_team_ = row_major ? x : y;
  d->col_team_ = row_major ? y : x;
  const DecompContext ctx = d->context();
  // Agreed: a backend that can run on some ranks only (NCCL missing on one node) fails all.
  // The halo backend "" is the transpose backend.
  layers.bootstrap.agree_on([&] {
    d->backend_ = pick_backend(field(config.backend, sizeof config.backend), ctx);
    const std::string halo = field(config.halo_backend, sizeof config.halo_backend);
    d->halo_backend_ = halo.empty() ? d->backend_ : pick_backend(halo, ctx);
  });
  // Collective: what the backends set up once (the nccl backend's communicators), and what
  // they keep for this decomposition (nccl_pipelined's stream); once for a backend that runs
  // both the transposes and the halo exchanges.
  layers.bootstrap.agree_on([&] {
    d->backend_->prepare(ctx);
    d->state_ = d->backend_->make_state(ctx);
    if (d->halo_backend_ != d->backend_) {
      d->halo_backend_->prepare(ctx);
      d->halo_state_ = d->halo_backend_->make_state(ctx);
    }
  });
  return d;
}

Decomp::~Decomp() {
  if (row_team_ != SYMCOMM_TEAM_INVALID) layers_.rma.destroy(row_team_);
  if (col_team_ != SYMCOMM_TEAM_INVALID) layers_.rma.destroy(col_team_);
}

DecompContext Decomp::context_with(DecompState* state) const {
  return DecompContext{geometry_, layers_.topology.rank, layers_.heap, layers_.rma,
                       layers_.copies, row_team_, col_team_, layers_.nccl, state,
                       layers_.registrations, traffic_.get()};
}

symcommDecompConfig_t Decomp::config() const {
  symcommDecompConfig_t c = geometry_.config();
  std::snprintf(c.backend, sizeof c.backend, "%s", backend_->name());
  std::snprintf(c.halo_backend, sizeof c.halo_backend, "%s", halo_backend_->name());
  return c;
}

}  // namespace symcomm
