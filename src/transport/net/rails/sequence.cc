#include "transport/net/rails/sequence.h"

#include <utility>

namespace symcomm::rails {

uint32_t MessageLog::add(std::vector<uint8_t> message) {
  const uint32_t seq = next_++;
  pending_.push_back(Entry{seq, std::move(message)});
  return seq;
}

void MessageLog::applied(uint32_t next) {
  while (!pending_.empty() && seq_before(pending_.front().seq, next)) pending_.pop_front();
}

MessageWindow::Fate MessageWindow::arrive(uint32_t seq, const uint8_t* message, size_t bytes) {
  if (seq == next_) {
    ++next_;
    return Fate::Apply;
  }
  if (seq_before(seq, next_)) return Fate::Duplicate;
  auto held = early_.find(seq);
  if (held == early_.end() && early_.size() >= kMaxEarly) return Fate::Dropped;
  early_[seq].assign(message, message + bytes);
  return Fate::Early;
}

bool MessageWindow::due(std::vector<uint8_t>* message) {
  auto it = early_.find(next_);
  if (it == early_.end()) return false;
  *message = std::move(it->second);
  early_.erase(it);
  ++next_;
  return true;
}

void MessageWindow::answered(uint32_t seq, uint64_t value) {
  answers_.emplace_back(seq, value);
  if (answers_.size() > kAnswers) answers_.pop_front();
}

bool MessageWindow::answer(uint32_t seq, uint64_t* value) const {
  for (const auto& [s, v] : answers_)
    if (s == seq) {
      *value = v;
      return true;
    }
  return false;
}

}  // namespace symcomm::rails
