// NCCL without a GPU: loading (a missing library is a clear reason, never a crash),
// NCCL_NVLS_ENABLE and NCCL_GRAPH_REGISTER kept off, symcomm types and reductions to NCCL's,
// version strings and result codes, and the registries listing "nccl" after "copy"
// ("nccl_pipelined" just before "nccl").
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "coll/coll.h"
#include "nccl/nccl_lib.h"
#include "symcomm/symcomm.h"
#include "decomp/backend.h"

namespace symcomm {
namespace {

template <typename T>
int index_of(const std::vector<T*>& all, const char* name) {
  for (size_t i = 0; i < all.size(); ++i)
    if (std::strcmp(all[i]->name(), name) == 0) return static_cast<int>(i);
  return -1;
}

TEST(Nccl, RegisteredAfterCopy) {
  EXPECT_GT(index_of(coll_algorithms(), "nccl"), index_of(coll_algorithms(), "copy"));
  EXPECT_GE(index_of(coll_algorithms(), "copy"), 0);
  EXPECT_GT(index_of(decomp_backends(), "nccl"), index_of(decomp_backends(), "copy"));
  EXPECT_GE(index_of(decomp_backends(), "copy"), 0);
  // The pipelined NCCL backend after copy, just before nccl, the baseline, which stays last.
  const int pipelined = index_of(decomp_backends(), "nccl_pipelined");
  EXPECT_GT(pipelined, index_of(decomp_backends(), "copy"));
  EXPECT_EQ(pipelined + 1, index_of(decomp_backends(), "nccl"));
  EXPECT_EQ(index_of(decomp_backends(), "nccl") + 1, static_cast<int>(decomp_backends().size()));
}

#ifdef SYMCOMM_HAVE_NCCL

TEST(Nccl, MapsEveryType) {
  const struct {
    symcommDataType_t ours;
    ncclDataType_t theirs;
  } pairs[] = {{symcommInt8, ncclInt8},       {symcommUint8, ncclUint8},
               {symcommInt32, ncclInt32},     {symcommUint32, ncclUint32},
               {symcommInt64, ncclInt64},     {symcommUint64, ncclUint64},
               {symcommFloat16, ncclFloat16}, {symcommBfloat16, ncclBfloat16},
               {symcommFloat32, ncclFloat32}, {symcommFloat64, ncclFloat64},
#if NCCL_VERSION_CODE >= 22400
               {symcommFloat8E4M3, ncclFloat8e4m3}, {symcommFloat8E5M2, ncclFloat8e5m2}
#endif
  };
#if NCCL_VERSION_CODE >= 22400
  static_assert(sizeof pairs / sizeof pairs[0] == symcommNumDataTypes, "every type");
#endif
  for (const auto& p : pairs) {
    EXPECT_TRUE(nccl_has_type(p.ours, 22809)) << p.ours;
    EXPECT_EQ(nccl_type(p.ours, 22809), p.theirs) << p.ours;
  }
  EXPECT_FALSE(nccl_has_type(symcommNumDataTypes, 22809));
  try {
    nccl_type(symcommNumDataTypes, 22809);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommInvalidArgument) << e.what();
  }
}

TEST(Nccl, Bfloat16NeedsNccl210) {
  EXPECT_FALSE(nccl_has_type(symcommBfloat16, 2908));  // 2.9.8 (the old encoding)
  EXPECT_TRUE(nccl_has_type(symcommBfloat16, 21000));  // 2.10.0
  EXPECT_TRUE(nccl_has_type(symcommFloat16, 2908));
  try {
    nccl_type(symcommBfloat16, 2908);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommNotSupported);
    EXPECT_NE(std::string(e.what()).find("2.9.8"), std::string::npos) << e.what();
  }
}

TEST(Nccl, Fp8NeedsNccl224) {
  for (symcommDataType_t t : {symcommFloat8E4M3, symcommFloat8E5M2}) {
    EXPECT_FALSE(nccl_has_type(t, 22304)) << t;  // 2.23.4
    EXPECT_EQ(nccl_has_type(t, 22400), NCCL_VERSION_CODE >= 22400) << t;
    try {
      nccl_type(t, 22304);
      ADD_FAILURE() << "no throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), symcommNotSupported);
      EXPECT_NE(std::string(e.what()).find("2.23.4"), std::string::npos) << e.what();
    }
  }
}

TEST(Nccl, MapsReductions) {
  EXPECT_EQ(nccl_op(symcommSum), ncclSum);
  EXPECT_EQ(nccl_op(symcommMin), ncclMin);
  EXPECT_EQ(nccl_op(symcommMax), ncclMax);
  EXPECT_EQ(nccl_op(symcommProd), ncclProd);
  EXPECT_EQ(nccl_op(symcommAvg), ncclAvg);
  EXPECT_THROW(nccl_op(symcommNumRedOps), Error);
  EXPECT_THROW(nccl_op(static_cast<symcommRedOp_t>(7)), Error);
}

TEST(Nccl, VersionStringsAndResultCodes) {
  EXPECT_EQ(nccl_version_string(22809), "2.28.9");
  EXPECT_EQ(nccl_version_string(21003), "2.10.3");
  EXPECT_EQ(nccl_version_string(2804), "2.8.4");
  EXPECT_EQ(nccl_result_code(ncclSuccess), symcommSuccess);
  EXPECT_EQ(nccl_result_code(ncclUnhandledCudaError), symcommCudaError);
  EXPECT_EQ(nccl_result_code(ncclSystemError), symcommSystemError);
  EXPECT_EQ(nccl_result_code(ncclInvalidArgument), symcommInvalidArgument);
  EXPECT_EQ(nccl_result_code(ncclInvalidUsage), symcommInvalidUsage);
  EXPECT_EQ(nccl_result_code(ncclRemoteError), symcommRemoteError);
  EXPECT_EQ(nccl_result_code(ncclInternalError), symcommInternalError);
}

// Restores an environment variable at the end of the scope.
class SavedEnv {
 public:
  explicit SavedEnv(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) {
      had_ = true;
      value_ = v;
    }
  }
  ~SavedEnv() {
    if (had_) setenv(name_, value_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string value_;
};

TEST(Nccl, MissingLibraryIsAReasonAndNvlsStaysOff) {
  SavedEnv saved("NCCL_NVLS_ENABLE");
  unsetenv("NCCL_NVLS_ENABLE");
  NcclLoad l = load_nccl("libsymcomm-test-no-such-nccl.so.2");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.reason.find("NCCL cannot be loaded"), std::string::npos) << l.reason;
  EXPECT_NE(l.reason.find("libsymcomm-test-no-such-nccl.so.2"), std::string::npos) << l.reason;
  // Set before anything of NCCL runs, whether or not it loads.
  ASSERT_NE(std::getenv("NCCL_NVLS_ENABLE"), nullptr);
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  // A caller's other value is overridden (and warned about).
  setenv("NCCL_NVLS_ENABLE", "1", 1);
  load_nccl("libsymcomm-test-no-such-nccl.so.2");
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
}

// NCCL's buffer registration in graph captures stays off likewise (nccl_lib.cc says why).
TEST(Nccl, GraphRegistrationStaysOff) {
  SavedEnv saved("NCCL_GRAPH_REGISTER");
  unsetenv("NCCL_GRAPH_REGISTER");
  load_nccl("libsymcomm-test-no-such-nccl.so.2");
  ASSERT_NE(std::getenv("NCCL_GRAPH_REGISTER"), nullptr);
  EXPECT_STREQ(std::getenv("NCCL_GRAPH_REGISTER"), "0");
  setenv("NCCL_GRAPH_REGISTER", "1", 1);
  load_nccl("libsymcomm-test-no-such-nccl.so.2");
  EXPECT_STREQ(std::getenv("NCCL_GRAPH_REGISTER"), "0");
}

// The first entry point that starts a thread sets both to 0, before that thread exists, so
// that loading NCCL later changes no environment other threads read. Run alone in its own
// process (ctest: unit_nccl_env_first_call; the once-per-process step is spent in a process
// that ran other tests), started with both set to 1.
TEST(NcclEnv, DISABLED_SetByTheFirstCallBeforeAnyThread) {
  ASSERT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "1");
  ASSERT_STREQ(std::getenv("NCCL_GRAPH_REGISTER"), "1");
  symcommUniqueId uid;
  ASSERT_EQ(symcommGetUniqueId(&uid), symcommSuccess) << symcommGetLastError();
  ASSERT_NE(std::getenv("NCCL_NVLS_ENABLE"), nullptr);
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  ASSERT_NE(std::getenv("NCCL_GRAPH_REGISTER"), nullptr);
  EXPECT_STREQ(std::getenv("NCCL_GRAPH_REGISTER"), "0");
}

TEST(Nccl, LoadsWhereInstalled) {
  const std::string why = nccl_unavailable_reason();
  if (!why.empty()) {
    EXPECT_EQ(NcclLib::get(), nullptr);
    EXPECT_THROW(nccl_lib(), Error);
    try {
      nccl_lib();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), symcommNotSupported);
    }
    GTEST_SKIP() << "NCCL is not installed here: " << why;
  }
  const NcclLib* lib = NcclLib::get();
  ASSERT_NE(lib, nullptr);
  EXPECT_GE(lib->version, 2700);  // ncclSend/ncclRecv
  // Nothing of this needs a GPU.
  EXPECT_GT(std::strlen(lib->ncclGetErrorString(ncclInvalidUsage)), 0u);
  try {
    throw_nccl_error(*lib, ncclInvalidArgument, "ncclAllReduce(...)", "here.cc", 1);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("ncclAllReduce(...) failed: "), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(lib->ncclGetErrorString(ncclInvalidArgument)),
              std::string::npos) << e.what();
  }
}

#else

TEST(Nccl, NotBuiltSaysWhy) {
  EXPECT_NE(nccl_unavailable_reason().find("nccl.h"), std::string::npos);
}

#endif

}  // namespace
}  // namespace symcomm
