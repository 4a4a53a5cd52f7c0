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

// A record of a call that the checks refused (DeviceError::code symcommInvalidArgument):
// throws it as an error that names the address, the size, the pe and what was left.
[[noreturn]] void throw_refused_device_call(const DeviceError& e);

}  // namespace symcomm
