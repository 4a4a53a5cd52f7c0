// The content of a symcommUniqueId: where the bootstrap root listens and the token that
// every connection to it must present.
#pragma once

#include <array>
#include <cstdint>

#include "bootstrap/socket.h"
#include "symcomm/symcomm.h"

namespace symcomm {

using Token = std::array<uint8_t, 16>;

struct UniqueId {
  static constexpr uint32_t kMagic = 0x53434944;  // "SCID"
  static constexpr uint32_t kVersion = 1;
  NetAddr root;
  Token token{};
  // Ports from root's on which the root may listen, the first free one (launcher_env.h):
  // joining ranks try them in turn. Not part of the encoded id (always 1 there).
  int root_ports = 1;

  symcommUniqueId encode() const;
  // Throws symcommInvalidArgument if `uid` was not made by encode() of this version.
  static UniqueId decode(const symcommUniqueId& uid);
};

// 128 bits from the kernel's random source.
Token random_token();
// Whether `given` (16 bytes from a peer) is `token`, in a time that does not depend on where
// they first differ: a process guessing the token learns nothing from how fast it is refused.
bool same_token(const uint8_t* given, const Token& token);
uint64_t random_u64();

// Hex text of bytes and back (lower case; decoding accepts either case).
std::string to_hex(const void* data, size_t bytes);
bool from_hex(const std::string& text, void* data, size_t bytes);

}  // namespace symcomm
