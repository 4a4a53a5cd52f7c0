// Teams: creation (collective), queries and translation.
#include <tuple>

#include "capi/guard.h"

using namespace symcomm;

extern "C" symcommResult_t symcommTeamSplitStrided(symcommComm_t comm, symcommTeam_t parent,
                                                   int start, int stride, int size,
                                                   symcommTeam_t* team) {
  return guarded([&] { return format("symcommTeamSplitStrided(parent=%d, start=%d, stride=%d, "
                                     "size=%d)", parent, start, stride, size); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(team);
    *team = SYMCOMM_TEAM_INVALID;
    c.check_live();
    *team = c.rma->split_strided(parent, start, stride, size);
  });
}

extern "C" symcommResult_t symcommTeamSplit2D(symcommComm_t comm, symcommTeam_t parent,
                                              int xrange, symcommTeam_t* xteam,
                                              symcommTeam_t* yteam) {
  return guarded([&] { return format("symcommTeamSplit2D(parent=%d, xrange=%d)", parent,
                                     xrange); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(xteam);
    SYMCOMM_REQUIRE_ARG(yteam);
    *xteam = *yteam = SYMCOMM_TEAM_INVALID;
    c.check_live();
    std::tie(*xteam, *yteam) = c.rma->split_2d(parent, xrange);
  });
}

extern "C" symcommResult_t symcommTeamDestroy(symcommComm_t comm, symcommTeam_t team) {
  return guarded([&] { return format("symcommTeamDestroy(team=%d)", team); }, [&] {
    symcommComm& c = checked(comm);
    c.rma->destroy(team);
    c.coll->forget_team(team);
  });
}

extern "C" symcommResult_t symcommTeamRank(symcommComm_t comm, symcommTeam_t team, int* rank) {
  return guarded([&] { return format("symcommTeamRank(team=%d)", team); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(rank);
    *rank = team == SYMCOMM_TEAM_INVALID ? -1 : c.rma->teams().get(team).index_of(c.topology.rank);
  });
}

extern "C" symcommResult_t symcommTeamSize(symcommComm_t comm, symcommTeam_t team, int* size) {
  return guarded([&] { return format("symcommTeamSize(team=%d)", team); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(size);
    *size = team == SYMCOMM_TEAM_INVALID ? -1 : c.rma->teams().get(team).size;
  });
}

extern "C" symcommResult_t symcommTeamTranslate(symcommComm_t comm, symcommTeam_t src_team,
                                                int src_pe, symcommTeam_t dst_team, int* dst_pe) {
  return guarded([&] { return format("symcommTeamTranslate(src_team=%d, src_pe=%d, dst_team=%d)",
                                     src_team, src_pe, dst_team); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(dst_pe);
    const Team& from = c.rma->teams().get(src_team);
    const Team& to = c.rma->teams().get(dst_team);
    SYMCOMM_REQUIRE(src_pe >= 0 && src_pe < from.size, symcommInvalidArgument,
                    "src_pe %d is out of range [0, %d) of team %d", src_pe, from.size, src_team);
    *dst_pe = to.index_of(from.world_of(src_pe));
  });
}
