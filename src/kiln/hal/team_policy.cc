#include <string_view>

#include "kiln/hal/device.h"

namespace kiln::hal {

StatusOr<TeamPolicy> parse_team_policy(std::string_view text) {
  for (TeamPolicy policy : {TeamPolicy::kAdaptive, TeamPolicy::kFull, TeamPolicy::kOneThread}) {
    if (text == team_policy_name(policy)) return policy;
  }
  return invalid_argument("team policy '{}': expected adaptive, full or one-thread", text);
}

std::string_view team_policy_name(TeamPolicy policy) {
  switch (policy) {
    case TeamPolicy::kAdaptive: return "adaptive";
    case TeamPolicy::kFull: return "full";
    case TeamPolicy::kOneThread: return "one-thread";
  }
  return "adaptive";
}

}  // namespace kiln::hal
