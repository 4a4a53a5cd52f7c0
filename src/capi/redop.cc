// symcommRedOpCreatePreMulSum and symcommRedOpDestroy: the communicator's pre-multiplied sums
// (capi/comm.h's PreMulSum), which the reductions of capi/coll.cc look up.
#include <cstring>

#include "capi/guard.h"
#include "coll/coll.h"

using namespace symcomm;

extern "C" symcommResult_t symcommRedOpCreatePreMulSum(symcommRedOp_t* op, const void* scalar,
                                                       symcommDataType_t type,
                                                       symcommScalarResidence_t residence,
                                                       symcommComm_t comm) {
  return guarded([&] { return format("symcommRedOpCreatePreMulSum(type=%d, residence=%d)",
                                     static_cast<int>(type), static_cast<int>(residence)); },
                 [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(op);
    SYMCOMM_REQUIRE_ARG(scalar);
    const size_t elem = type_size(type);
    SYMCOMM_REQUIRE(residence == symcommScalarHost || residence == symcommScalarDevice,
                    symcommInvalidArgument, "residence %d is not a symcommScalarResidence_t",
                    static_cast<int>(residence));
    SYMCOMM_REQUIRE(c.next_redop < (1 << 30), symcommInvalidUsage,
                    "%d reduction ops were made on this communicator", c.next_redop);
    PreMulSum p{type, residence == symcommScalarDevice, 0, nullptr};
    if (p.on_device) p.scalar = scalar;
    else std::memcpy(&p.value, scalar, elem);
    const int id = c.next_redop++;
    c.premul_sums[id] = p;
    *op = static_cast<symcommRedOp_t>(id);
  });
}

extern "C" symcommResult_t symcommRedOpDestroy(symcommRedOp_t op, symcommComm_t comm) {
  return guarded([&] { return format("symcommRedOpDestroy(op=%d)", static_cast<int>(op)); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE(c.premul_sums.erase(static_cast<int>(op)) == 1, symcommInvalidArgument,
                    "op %d is not a reduction op made on this communicator (built-in, destroyed "
                    "already, or of another communicator)", static_cast<int>(op));
  });
}
