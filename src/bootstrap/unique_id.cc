#include "bootstrap/unique_id.h"

#include <sys/random.h>

#include <cstring>

#include "base/error.h"

namespace symcomm {

namespace {
// The wire layout inside symcommUniqueId::internal (little-endian host order; a unique id
// only travels between processes of one job).
struct Wire {
  uint32_t magic;
  uint32_t version;
  NetAddr root;
  uint8_t token[16];
};
static_assert(sizeof(Wire) <= SYMCOMM_UNIQUE_ID_BYTES);
}  // namespace

symcommUniqueId UniqueId::encode() const {
  symcommUniqueId out;
  std::memset(&out, 0, sizeof out);
  Wire w{kMagic, kVersion, root, {}};
  std::memcpy(w.token, token.data(), token.size());
  std::memcpy(out.internal, &w, sizeof w);
  return out;
}

UniqueId UniqueId::decode(const symcommUniqueId& uid) {
  Wire w;
  std::memcpy(&w, uid.internal, sizeof w);
  SYMCOMM_REQUIRE(w.magic == kMagic, symcommInvalidArgument,
                  "uid is not a symcomm unique id (bad magic 0x%08x; was it made by "
                  "symcommGetUniqueId?)", w.magic);
  SYMCOMM_REQUIRE(w.version == kVersion, symcommInvalidArgument,
                  "uid has version %u, this library understands version %u", w.version,
                  kVersion);
  SYMCOMM_REQUIRE(w.root.family == AF_INET || w.root.family == AF_INET6, symcommInvalidArgument,
                  "uid has an unknown address family %u", w.root.family);
  for (size_t i = sizeof w; i < sizeof uid.internal; ++i)
    SYMCOMM_REQUIRE(uid.internal[i] == 0, symcommInvalidArgument,
                    "uid has stray bytes after its content (byte %zu)", i);
  UniqueId u;
  u.root = w.root;
  std::memcpy(u.token.data(), w.token, u.token.size());
  return u;
}

static void fill_random(void* buf, size_t bytes) {
  auto* p = static_cast<uint8_t*>(buf);
  while (bytes > 0) {
    ssize_t n = getrandom(p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    SYMCOMM_SYSCHECK(n);
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

Token random_token() {
  Token t;
  fill_random(t.data(), t.size());
  return t;
}

bool same_token(const uint8_t* given, const Token& token) {
  // Every byte is looked at; volatile keeps the compiler from stopping at the first difference.
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < token.size(); ++i) diff = diff | (given[i] ^ token[i]);
  return diff == 0;
}

uint64_t random_u64() {
  uint64_t v;
  fill_random(&v, sizeof v);
  return v;
}

std::string to_hex(const void* data, size_t bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string s(2 * bytes, '0');
  auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    s[2 * i] = digits[p[i] >> 4];
    s[2 * i + 1] = digits[p[i] & 15];
  }
  return s;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool from_hex(const std::string& text, void* data, size_t bytes) {
  if (text.size() != 2 * bytes) return false;
  auto* p = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    p[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace symcomm
