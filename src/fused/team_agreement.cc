#include "fused/team_agreement.h"

#include <vector>

#include "base/error.h"

namespace symcomm {

namespace {

// "field=value" items of a description.
std::vector<std::string> items(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(';', at);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// Why `theirs` (team rank `who`'s) differs from `mine` (team rank 0's), or "".
std::string difference(const std::string& mine, const std::string& theirs, int who) {
  if (mine == theirs) return "";
  const std::vector<std::string> a = items(mine), b = items(theirs);
  for (size_t i = 0; i < a.size() || i < b.size(); ++i) {
    const std::string x = i < a.size() ? a[i] : "", y = i < b.size() ? b[i] : "";
    if (x != y)
      return format("team rank %d passed %s where team rank 0 passed %s", who, y.c_str(),
                    x.c_str());
  }
  return format("team rank %d passed another configuration", who);
}

}  // namespace

void agree_over_team(Bootstrap& bootstrap, const Team& team, int me, uint64_t tag,
                     symcommResult_t code, const std::string& text, const char* what) {
  const std::string mine = std::to_string(static_cast<int>(code)) + "\n" + text;
  std::string verdict;  // "code\nmessage": 0 where every member agrees
  if (me == 0) {
    symcommResult_t first = code;
    std::string message = code == symcommSuccess ? "" : "team rank 0: " + text;
    for (int t = 1; t < team.size; ++t) {
      const std::string got = bootstrap.recv_from(team.world_of(t), tag);
      const size_t nl = got.find('\n');
      const auto theirs = static_cast<symcommResult_t>(std::stoi(got.substr(0, nl)));
      const std::string body = got.substr(nl + 1);
      if (first != symcommSuccess) continue;
      if (theirs != symcommSuccess) {
        first = theirs;
        message = format("team rank %d: %s", t, body.c_str());
      } else if (std::string why = difference(text, body, t); !why.empty()) {
        first = symcommInvalidUsage;
        message = format("the members of the team disagree (%s must be called alike on every "
                         "member): %s", what, why.c_str());
      }
    }
    verdict = std::to_string(static_cast<int>(first)) + "\n" + message;
    for (int t = 1; t < team.size; ++t) bootstrap.send_to(team.world_of(t), tag, verdict);
  } else {
    bootstrap.send_to(team.world_of(0), tag, mine);
    verdict = bootstrap.recv_from(team.world_of(0), tag);
  }
  const size_t nl = verdict.find('\n');
  const auto outcome = static_cast<symcommResult_t>(std::stoi(verdict.substr(0, nl)));
  if (outcome != symcommSuccess) throw Error(outcome, verdict.substr(nl + 1));
}

}  // namespace symcomm
