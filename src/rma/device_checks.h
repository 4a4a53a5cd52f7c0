// The host side of the device API's bounds checks (SYMCOMM_DEVICE_CHECKS in
// symcomm/device.cuh): the table of allocations that the checks read, and the error that
// reports a call they refused.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "symcomm/device_comm.h"

namespace symcomm {

// Rewrites `table` (host-mapped, read by kernels while it changes) with `live`, (offset,
// bytes) by offset: the version is odd while the entries change, so that a reader that saw
// a rewrite starts over.
void write_allocation_table(DeviceAllocations& table,
                            const std::vector<std::pair<size_t, size_t>>& live);

// A record of a call that was refused (DeviceError::cmp a DeviceRefusal: the bounds checks;
// a member on another node that cannot take it): throws it as an error that says why and
// names the address, the size and the pe.
[[noreturn]] void throw_refused_device_call(const DeviceError& e);

}  // namespace symcomm
