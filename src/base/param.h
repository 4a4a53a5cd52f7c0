// The typed registry of environment parameters. Every environment variable symcomm reads,
// its own SYMCOMM_* tunables and the launchers' variables alike, is declared once as a
// parameter object at namespace scope in the file that uses it:
//
//   static const symcomm::SecondsParam kTimeout("SYMCOMM_BOOTSTRAP_TIMEOUT", "60",
//                                               "bound on every bootstrap step");
//
// and read with kTimeout.get(). Values are read from the environment at each get(), so a
// test or a program may set a variable before the call that uses it; a number is parsed
// again only where its text changed (get() is on the collectives' host path). A declaration carries
// the parameter's valid values (an integer's or a size's range, a duration's minimum), and
// get() refuses a malformed value or one outside them: an error (symcommInvalidArgument)
// naming the variable, the value and what it must be. validate_all() checks every
// registered parameter at once: communicator initialization calls it first, in every
// memory space, so that a parameter that only GPU code reads is refused on a host-only
// machine too, and every rank (all get the same environment) fails alike before any rank
// joins. `symcomm-info` and symcommGetParam list the registry.
//
// Durations follow one rule: 0 means "no bound" for every timeout; a duration that is not a
// bound (an interval) refuses 0; a positive duration below the declaration's minimum is
// refused.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
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
  // The text in force, as text() but without a copy: the environment's, or the default.
  const char* current() const;
  // A number's value parsed from `text` before, where `text` is the one it was parsed from;
  // remember() records it (a parse that failed records nothing: it fails again).
  bool cached(const char* text, uint64_t* value) const;
  void remember(const char* text, uint64_t value) const;
  // "environment parameter NAME='value' is not <expected>".
  [[noreturn]] void reject(const std::string& value, const char* expected) const;
  // "environment parameter NAME='value' <why>".
  [[noreturn]] void refuse(const std::string& value, const std::string& why) const;

 private:
  const char* name_;
  ParamType type_;
  const char* default_;
  const char* description_;
  const char* choices_;
  mutable std::mutex cache_mutex_;
  mutable bool cache_set_ = false;
  mutable std::string cache_text_;
  mutable uint64_t cache_value_ = 0;
};

// A decimal integer in [lo, hi] (the declaration's range; all of int64_t unless narrowed).
class IntParam : public Param {
 public:
  IntParam(const char* name, const char* def, const char* desc, int64_t lo = INT64_MIN,
           int64_t hi = INT64_MAX)
      : Param(name, ParamType::Int, def, desc), lo_(lo), hi_(hi) {}
  int64_t get() const;
  int64_t lo() const { return lo_; }
  int64_t hi() const { return hi_; }

 private:
  int64_t lo_, hi_;
};

// A byte count: "4096", "64K", "512M", "8G", "1T" (binary multiples), in [lo, hi] bytes (the
// declaration's range; at most kMaxBytes, so that rounding a size up never overflows).
class SizeParam : public Param {
 public:
  static constexpr size_t kMaxBytes = size_t{1} << 60;
  SizeParam(const char* name, const char* def, const char* desc, size_t lo = 0,
            size_t hi = kMaxBytes)
      : Param(name, ParamType::Size, def, desc), lo_(lo), hi_(std::min(hi, kMaxBytes)) {}
  size_t get() const;
  size_t lo() const { return lo_; }
  size_t hi() const { return hi_; }

 private:
  size_t lo_, hi_;
};

// 1/0, true/false, yes/no, on/off.
class BoolParam : public Param {
 public:
  BoolParam(const char* name, const char* def, const char* desc)
      : Param(name, ParamType::Bool, def, desc) {}
  bool get() const;
};

// A non-negative duration in seconds ("60", "0.5"). 0 is "no bound" where the declaration
// says Zero::NoBound (every timeout), and refused where it says Zero::Refused (an interval);
// a positive duration below the declaration's minimum is refused. Values above kMaxSeconds
// (about 116 days) count as kMaxSeconds: every bound is then still a bound, and no
// conversion of it (to nanoseconds in std::chrono, or on the GPU) overflows; before, 1e10
// seconds wrapped to a negative deadline and every wait timed out at once.
class SecondsParam : public Param {
 public:
  static constexpr double kMaxSeconds = 1e7;
  enum class Zero { NoBound, Refused };
  SecondsParam(const char* name, const char* def, const char* desc, double min_seconds,
               Zero zero = Zero::NoBound)
      : Param(name, ParamType::Seconds, def, desc), min_(min_seconds), zero_(zero) {}
  double get() const;
  // Milliseconds, rounded; a positive duration is at least 1 ms.
  int64_t get_ms() const {
    const double s = get();
    return s > 0 ? std::max<int64_t>(1, static_cast<int64_t>(s * 1000.0 + 0.5)) : 0;
  }
  double min_seconds() const { return min_; }
  bool zero_is_no_bound() const { return zero_ == Zero::NoBound; }

 private:
  double min_;
  Zero zero_;
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

// Checks the value in force of every registered parameter but the strings (whose users
// check them: launcher variables, algorithm names): throws symcommInvalidArgument naming
// every parameter that get() would refuse, with its value and what it must be.
void validate_all();

// Parsers shared with the registry's users (unit-tested on their own).
std::optional<size_t> parse_size(const std::string& text);
std::optional<int64_t> parse_int(const std::string& text);
std::optional<bool> parse_bool(const std::string& text);
std::optional<double> parse_seconds(const std::string& text);

}  // namespace symcomm
