// Errors inside symcomm: C++ exceptions that carry a result code and a message with the
// failing call and file:line. Only the C boundary (src/capi) catches them and turns them
// into a symcommResult_t plus the per-thread last-error message.
#pragma once

#include <cerrno>
#include <stdexcept>
#include <string>

#include "symcomm/symcomm.h"

namespace symcomm {

class Error : public std::runtime_error {
 public:
  Error(symcommResult_t code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  symcommResult_t code() const { return code_; }

 private:
  symcommResult_t code_;
};

// Formats like printf into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void throw_error(symcommResult_t code, const char* file, int line,
                              const std::string& message);
// A system call failed with `err` (an errno value).
[[noreturn]] void throw_system_error(const char* file, int line, const char* call, int err);

// "1.5 GiB (1610612736 bytes)": sizes in messages, for humans and for grep.
std::string format_bytes(size_t bytes);

// The exception being handled, for a catch (...) block: an Error's code and message,
// symcommOutOfMemory for std::bad_alloc, symcommInternalError for any other.
struct Caught {
  symcommResult_t code = symcommInternalError;
  std::string what;
};
Caught caught_exception();

}  // namespace symcomm

#define SYMCOMM_THROW(code, ...) \
  ::symcomm::throw_error((code), __FILE__, __LINE__, ::symcomm::format(__VA_ARGS__))

// Checks an argument or a state; the message names what was wrong.
#define SYMCOMM_REQUIRE(cond, code, ...)  \
  do {                                     \
    if (!(cond)) SYMCOMM_THROW(code, __VA_ARGS__); \
  } while (0)

// Checks a system call that returns -1 and sets errno on failure.
#define SYMCOMM_SYSCHECK(call)                                                  \
  do {                                                                          \
    if ((call) == -1) ::symcomm::throw_system_error(__FILE__, __LINE__, #call, errno); \
  } while (0)
