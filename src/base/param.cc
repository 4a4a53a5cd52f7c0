#include "base/param.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "base/error.h"

namespace symcomm {

namespace {
std::vector<const Param*>& registry() {
  static std::vector<const Param*> params;
  return params;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}
}  // namespace

Param::Param(const char* name, ParamType type, const char* default_value,
             const char* description, const char* choices)
    : name_(name), type_(type), default_(default_value), description_(description),
      choices_(choices) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().push_back(this);
}

const std::vector<const Param*>& Param::all() { return registry(); }

const char* Param::type_name() const {
  switch (type_) {
    case ParamType::Int: return "int";
    case ParamType::Size: return "size";
    case ParamType::Bool: return "bool";
    case ParamType::Seconds: return "seconds";
    case ParamType::String: return "string";
    case ParamType::Enum: return "enum";
  }
  return "?";
}

std::optional<std::string> Param::raw() const {
  // The one place symcomm reads its environment.
  const char* v = std::getenv(name_);
  if (!v) return std::nullopt;
  return std::string(v);
}

const char* Param::current() const {
  const char* v = std::getenv(name_);
  return v ? v : default_;
}

bool Param::cached(const char* text, uint64_t* value) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (!cache_set_ || cache_text_ != text) return false;
  *value = cache_value_;
  return true;
}

void Param::remember(const char* text, uint64_t value) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  cache_set_ = true;
  cache_text_ = text;
  cache_value_ = value;
}

void Param::reject(const std::string& value, const char* expected) const {
  refuse(value, std::string("is not ") + expected);
}

void Param::refuse(const std::string& value, const std::string& why) const {
  // No file:line: the message names the variable, which says more.
  throw Error(symcommInvalidArgument,
              format("environment parameter %s='%s' %s", name_, value.c_str(), why.c_str()));
}

std::string Param::validated_text() const {
  switch (type_) {
    case ParamType::Int: return std::to_string(static_cast<const IntParam*>(this)->get());
    case ParamType::Size: return std::to_string(static_cast<const SizeParam*>(this)->get());
    case ParamType::Bool: return static_cast<const BoolParam*>(this)->get() ? "1" : "0";
    case ParamType::Seconds: return format("%g", static_cast<const SecondsParam*>(this)->get());
    case ParamType::Enum: return static_cast<const EnumParam*>(this)->get();
    case ParamType::String: return text();
  }
  return text();
}

std::optional<int64_t> parse_int(const std::string& text) {
  std::string t = trim(text);
  if (t.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);  // decimal: "010" is ten, "0x10" junk
  if (errno != 0 || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(v);
}

namespace {
// A size's text: malformed, too large for size_t, or a value.
enum class SizeText { Malformed, TooLarge, Ok };
SizeText read_size(const std::string& text, size_t* out) {
  std::string t = trim(text);
  if (t.empty() || !std::isdigit(static_cast<unsigned char>(t[0]))) return SizeText::Malformed;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(t.c_str(), &end, 10);
  const bool overflow = errno == ERANGE;
  std::string suffix = lower(trim(end));
  if (!suffix.empty() && suffix.back() == 'b') suffix.pop_back();  // "64MB", "64MiB" too
  if (suffix.size() == 2 && suffix[1] == 'i') suffix.pop_back();
  int shift = 0;
  if (suffix.empty()) shift = 0;
  else if (suffix == "k") shift = 10;
  else if (suffix == "m") shift = 20;
  else if (suffix == "g") shift = 30;
  else if (suffix == "t") shift = 40;
  else return SizeText::Malformed;
  if (overflow || (shift > 0 && v > (~0ull >> shift))) return SizeText::TooLarge;
  *out = static_cast<size_t>(v << shift);
  return SizeText::Ok;
}
}  // namespace

std::optional<size_t> parse_size(const std::string& text) {
  size_t v = 0;
  if (read_size(text, &v) != SizeText::Ok) return std::nullopt;
  return v;
}

std::optional<bool> parse_bool(const std::string& text) {
  std::string t = lower(trim(text));
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  return std::nullopt;
}

std::optional<double> parse_seconds(const std::string& text) {
  std::string t = trim(text);
  if (t.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

int64_t IntParam::get() const {
  const char* now = current();
  uint64_t bits = 0;
  if (cached(now, &bits)) return static_cast<int64_t>(bits);
  std::string t = now;
  auto v = parse_int(t);
  const bool whole_range = lo_ == INT64_MIN && hi_ == INT64_MAX;
  if (!v || *v < lo_ || *v > hi_) {
    if (whole_range) reject(t, "an integer");
    reject(t, format("an integer in [%lld, %lld]", static_cast<long long>(lo_),
                     static_cast<long long>(hi_)).c_str());
  }
  remember(now, static_cast<uint64_t>(*v));
  return *v;
}

size_t SizeParam::get() const {
  const char* now = current();
  uint64_t bits = 0;
  if (cached(now, &bits)) return static_cast<size_t>(bits);
  std::string t = now;
  size_t v = 0;
  switch (read_size(t, &v)) {
    case SizeText::Malformed:
      reject(t, "a size (a number with an optional K, M, G or T suffix)");
    case SizeText::TooLarge:
      v = SIZE_MAX;  // above every declaration's hi: refused just below
      break;
    case SizeText::Ok:
      break;
  }
  if (v > hi_) refuse(t, "is too large: at most " + format_bytes(hi_));
  if (v < lo_) refuse(t, "is too small: at least " + format_bytes(lo_));
  remember(now, v);
  return v;
}

bool BoolParam::get() const {
  const char* now = current();
  uint64_t bits = 0;
  if (cached(now, &bits)) return bits != 0;
  std::string t = now;
  auto v = parse_bool(t);
  if (!v) reject(t, "a boolean (1/0, true/false, yes/no, on/off)");
  remember(now, *v ? 1 : 0);
  return *v;
}

double SecondsParam::get() const {
  std::string t = text();
  auto v = parse_seconds(t);
  if (!v) reject(t, "a non-negative number of seconds");
  if (*v == 0 && zero_is_no_bound()) return 0;
  if (*v < min_)
    refuse(t, format("is below the minimum of %g s%s", min_,
                     zero_is_no_bound() ? " (0: no bound)" : ""));
  return std::min(*v, kMaxSeconds);
}

std::string EnumParam::get() const {
  std::string t = lower(trim(text()));
  std::string list = Param::choices();
  size_t start = 0;
  while (start <= list.size()) {
    size_t bar = list.find('|', start);
    if (bar == std::string::npos) bar = list.size();
    if (list.compare(start, bar - start, t) == 0 && bar - start == t.size()) return t;
    start = bar + 1;
  }
  reject(text(), format("one of %s", Param::choices()).c_str());
}

bool SwitchParam::get(bool automatic) const {
  const std::string v = EnumParam::get();
  return v == "auto" ? automatic : *parse_bool(v);
}

void validate_all() {
  std::string problems;
  int count = 0;
  for (const Param* p : Param::all()) {
    if (p->type() == ParamType::String) continue;
    try {
      p->validated_text();
    } catch (const Error& e) {
      problems += (count++ ? "; " : "") + std::string(e.what());
    }
  }
  if (count > 0)
    throw Error(symcommInvalidArgument,
                count == 1 ? problems
                           : format("%d environment parameters are invalid: %s", count,
                                    problems.c_str()));
}

}  // namespace symcomm
