// Agreement among the members of a team on a call that must be made alike on every member
// (a fused plan's creation), through the bootstrap: the members' verdicts and descriptions
// go to team rank 0, which answers every member with the same outcome.
#pragma once

#include <cstdint>
#include <string>

#include "bootstrap/bootstrap.h"
#include "rma/team.h"
#include "symcomm/symcomm.h"

namespace symcomm {

// This member's side: `code` is its own verdict on the call (symcommSuccess, or the error its
// checks raised, with `text` the message), else `text` describes the call as
// "field=value;field=value;...". Collective over `team` (this rank is member `me`); `tag`
// numbers the call among the team's (unique for it, the same on every member). Throws, on
// every member alike, the first member's error where one failed, or symcommInvalidUsage
// naming the first field that differs from team rank 0's and both values.
void agree_over_team(Bootstrap& bootstrap, const Team& team, int me, uint64_t tag,
                     symcommResult_t code, const std::string& text, const char* what);

}  // namespace symcomm
