#include "base/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

namespace symcomm {

std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string out;
  if (n > 0) {
    out.resize(static_cast<size_t>(n) + 1);
    std::vsnprintf(out.data(), out.size(), fmt, ap2);
    out.resize(static_cast<size_t>(n));
  }
  va_end(ap2);
  return out;
}

static const char* basename_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

void throw_error(symcommResult_t code, const char* file, int line, const std::string& message) {
  throw Error(code, message + format(" [%s:%d]", basename_of(file), line));
}

void throw_system_error(const char* file, int line, const char* call, int err) {
  char buf[256];
  const char* text = strerror_r(err, buf, sizeof buf);
  throw Error(symcommSystemError,
              format("%s failed: %s (errno %d) [%s:%d]", call, text, err, basename_of(file), line));
}

std::string format_bytes(size_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return format("%zu bytes", bytes);
  return format("%.4g %s (%zu bytes)", v, units[u], bytes);
}

Caught caught_exception() {
  try {
    throw;
  } catch (const Error& e) {
    return {e.code(), e.what()};
  } catch (const std::bad_alloc&) {
    return {symcommOutOfMemory, "out of host memory"};
  } catch (const std::exception& e) {
    return {symcommInternalError, e.what()};
  } catch (...) {
    return {symcommInternalError, "unknown exception"};
  }
}

}  // namespace symcomm
