// Families of implementations that register themselves (collective algorithms, decomposition
// backends, and transports to come): each implementation's file holds one
//   static const Registered<Family, Implementation> kRegistered;
// and nothing else names it: no list to extend, no factory to declare. The registry keeps
// them in the order of each one's `preference` (lower first; ties by name), the order in
// which an automatic choice considers them.
//
// The sources are one object library (src/CMakeLists.txt), never a static archive, so no
// registering object is dropped by the linker. Registration runs during static
// initialisation; the registry is a function-local static, so it exists before the first
// file registers, whatever the order in which files are initialised.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace symcomm {

// The answer of can_implement(call): whether the implementation can run the call, and where
// it cannot, why, in words that complete "... cannot run <call> here: " (never empty).
class Verdict {
 public:
  static Verdict yes() { return Verdict(); }
  static Verdict no(std::string why) {
    Verdict v;
    v.reason_ = why.empty() ? std::string("it gives no reason") : std::move(why);
    return v;
  }
  bool ok() const { return reason_.empty(); }
  explicit operator bool() const { return ok(); }
  const std::string& reason() const { return reason_; }

 private:
  Verdict() = default;
  std::string reason_;
};

template <typename Family>
class Registry {
 public:
  static Registry& instance() {
    static Registry registry;
    return registry;
  }
  // Every registered implementation, preferred first.
  const std::vector<Family*>& all() const { return items_; }
  // The one named `name`, or nullptr.
  Family* find(const std::string& name) const {
    for (Family* f : items_)
      if (name == f->name()) return f;
    return nullptr;
  }
  void add(Family* item, int preference) {
    size_t at = 0;
    while (at < order_.size() &&
           (order_[at].first < preference ||
            (order_[at].first == preference && std::string(order_[at].second->name()) < item->name())))
      ++at;
    order_.insert(order_.begin() + static_cast<long>(at), {preference, item});
    items_.clear();
    for (auto& [p, f] : order_) items_.push_back(f);
  }

 private:
  std::vector<std::pair<int, Family*>> order_;
  std::vector<Family*> items_;
};

// Makes one Implementation (stateless, shared by every communicator) and registers it.
template <typename Family, typename Implementation>
struct Registered {
  explicit Registered(int preference) {
    static Implementation implementation;
    Registry<Family>::instance().add(&implementation, preference);
  }
};

}  // namespace symcomm
