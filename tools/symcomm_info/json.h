// A small JSON writer for symcomm-info --json: objects, arrays, strings (escaped), numbers and
// booleans, with the commas between members placed for the caller.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace symcomm_info {

class Json {
 public:
  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  // The name of the next member of the object being written.
  void key(const std::string& name) {
    separate();
    string(name);
    out_ += ": ";
    after_key_ = true;
  }
  void value(const std::string& text) { separate(); string(text); }
  void value(const char* text) { value(std::string(text)); }
  void value(int64_t number) { separate(); out_ += std::to_string(number); }
  void value(int number) { value(static_cast<int64_t>(number)); }
  void value(bool flag) { separate(); out_ += flag ? "true" : "false"; }
  void value(double number) {
    separate();
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", number);
    out_ += text;
  }
  template <typename T>
  void member(const std::string& name, const T& v) {
    key(name);
    value(v);
  }
  const std::string& text() const { return out_; }

 private:
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) out_ += ", ";
      first_.back() = false;
    }
  }
  void open(char bracket) {
    separate();
    out_ += bracket;
    first_.push_back(true);
  }
  void close(char bracket) {
    first_.pop_back();
    out_ += bracket;
  }
  void string(const std::string& text) {
    out_ += '"';
    for (unsigned char c : text) {
      if (c == '"' || c == '\\') {
        out_ += '\\';
        out_ += static_cast<char>(c);
      } else if (c < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
        out_ += escaped;
      } else {
        out_ += static_cast<char>(c);
      }
    }
    out_ += '"';
  }

  std::string out_;
  std::vector<bool> first_;  // per open object or array: no member written yet
  bool after_key_ = false;
};

}  // namespace symcomm_info
