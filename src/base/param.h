// The typed registry of environment parameters. Every environment variable symcomm reads,
// its own SYMCOMM_* tunables and the launchers' variables alike, is declared once as a
// parameter object at namespace scope in the file that uses it:
//
//   static const symcomm::SecondsParam kTimeout("SYMCOMM_BOOTSTRAP_TIMEOUT", "60",
//                                               "bound on every bootstrap step");
//
// and read with kTimeout.get(). Values are read from the environment at each get(), so a
// test or a program may set a variable before the call that uses it. A malformed value is
// an error (symcommInvalidArgument) naming the variable and the value. `symcomm-info` and
// symcommGetParam list the registry.
#pragma once

#include <algorithm>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace symcomm {

enum class ParamType { Int, Size, Bool, Seconds, String, Enum };

class Param {
 public:
  Param(const char* name, ParamType type, const char* default_value, const char* description,
        const char* choices = nullptr);
  Param(const Param&) = delete;
  Param& operator=(const Param&) = delete;

  const char* name() const { return name_; }
  ParamType type() const { return type_; }
  const char* type_name() const;
  const char* default_value() const { return default_; }
  const char* description() const { return description_; }
  const char* choices() const { return choices_; }  // "a|b|c" for Enum, else null
  // The environment's text, if the variable is set (even to "").
  std::optional<std::string> raw() const;
  // The text in force: the environment's or the default.
  std::string text() const { return raw().value_or(default_); }
  // Parses and validates the value in force; throws on a malformed value.
  std::string validated_text() const;

  static const std::vector<const Param*>& all();

 protected:
  [[noreturn]] void reject(const std::string& value, const char* expected) const;

 private:
  const char* name_;
  ParamType type_;
  const char* default_;
  const char* description_;
  const char* choices_;
};

class IntParam : public Param {
 public:
  IntParam(const char* name, const char* def, const char* desc)
      : Param(name, ParamType::Int, def, desc) {}
  int64_t get() const;
  // get(), refused (symcommInvalidArgument, naming the variable) outside [lo, hi].
  int64_t get_in(int64_t lo, int64_t hi) const;
};

// A byte count: "4096", "64K", "512M", "8G", "1T" (binary multiples).
class SizeParam : public Param {
 public:
  SizeParam(const char* name, const char* def, const char* desc)
      : Param(name, ParamType::Size, def, desc) {}
  size_t get() const;
};

// 1/0, true/false, yes/no, on/off.
class BoolParam : public Param {
 public:
  BoolParam(const char* name, const char* def, const char* desc)
      : Param(name, ParamType::Bool, def, desc) {}
  bool get() const;
};

// A non-negative duration in seconds ("60", "0.5"). Values above kMaxSeconds (about 116 days)
// count as kMaxSeconds: every bound is then still a bound, and no conversion of it (to
// nanoseconds in std::chrono, or on the GPU) overflows; before, 1e10 seconds wrapped to a
// negative deadline and every wait timed out at once.
class SecondsParam : public Param {
 public:
  static constexpr double kMaxSeconds = 1e7;
  SecondsParam(const char* name, const char* def, const char* desc)
      : Param(name, ParamType::Seconds, def, desc) {}
  double get() const;
  // Milliseconds, rounded; a positive duration is at least 1 ms (0 often means "no bound").
  int64_t get_ms() const {
    const double s = get();
    return s > 0 ? std::max<int64_t>(1, static_cast<int64_t>(s * 1000.0 + 0.5)) : 0;
  }
};

class StringParam : public Param {
 public:
  StringParam(const char* name, const char* def, const char* desc)
      : Param(name, ParamType::String, def, desc) {}
  std::string get() const { return text(); }
};

// One of a fixed set of words, case-insensitive; get() returns the word in lower case.
class EnumParam : public Param {
 public:
  EnumParam(const char* name, const char* def, const char* choices, const char* desc)
      : Param(name, ParamType::Enum, def, desc, choices) {}
  std::string get() const;
};

// A check or feature whose default depends on the situation: "auto" (the default: the
// caller's `automatic`) or a boolean that forces it.
class SwitchParam : public EnumParam {
 public:
  SwitchParam(const char* name, const char* desc)
      : EnumParam(name, "auto", "auto|1|0|on|off|true|false|yes|no", desc) {}
  bool get(bool automatic) const;
};

// Parsers shared with the registry's users (unit-tested on their own).
std::optional<size_t> parse_size(const std::string& text);
std::optional<int64_t> parse_int(const std::string& text);
std::optional<bool> parse_bool(const std::string& text);
std::optional<double> parse_seconds(const std::string& text);

}  // namespace symcomm
