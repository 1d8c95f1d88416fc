#include "kiln/hal/cpu/team_choice.h"

#include "kiln/hal/cpu/runnable_tasks.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

namespace kiln::hal::cpu {
namespace {

// What a run took: wall milliseconds and the calling thread's CPU share.
struct RunTime {
  double ms;
  double share;
};

// Runs `runs` runs whose times `time_of` gives (per plan), returning the plans chosen.
std::vector<Team> drive(TeamChoice& choice, int runs, const std::function<RunTime(Team)>& time_of) {
  std::vector<Team> chosen;
  for (int i = 0; i < runs; ++i) {
    const Team team = choice.next();
    chosen.push_back(team);
    const RunTime t = time_of(team);
    choice.record(team, t.ms, t.share);
  }
  return chosen;
}

int count(const std::vector<Team>& teams, Team which) {
  int n = 0;
  for (Team t : teams) n += t == which;
  return n;
}

std::vector<Team> last(const std::vector<Team>& teams, size_t n) {
  return std::vector<Team>(teams.end() - static_cast<std::ptrdiff_t>(n), teams.end());
}

// MobileNetV2 at batch 1 on 2 cores. Quiet: the full team is faster (2.4 vs 4.0 ms) and the
// calling thread is never descheduled.
RunTime quiet(Team t) { return t == Team::kFull ? RunTime{2.4, 0.99} : RunTime{4.0, 0.99}; }
// One busy-loop process per core: the full team waits at its barriers (15.8 vs 4.3 ms) and the
// calling thread gets half a core.
RunTime busy(Team t) { return t == Team::kFull ? RunTime{15.8, 0.5} : RunTime{4.3, 0.6}; }

TEST(TeamChoice, AQuietMachineNeverTriesTheOneThreadPlan) {
  TeamChoice choice;
  const std::vector<Team> teams = drive(choice, 500, quiet);
  EXPECT_EQ(count(teams, Team::kOneThread), 0);
  EXPECT_EQ(choice.current(), Team::kFull);
}

TEST(TeamChoice, AColdFirstRunDecidesNothing) {
  TeamChoice choice;
  // The first run is slow and descheduled (memory touched for the first time), the rest quiet.
  bool first = true;
  const std::vector<Team> teams = drive(choice, 100, [&](Team t) {
    if (first) {
      first = false;
      return RunTime{50.0, 0.3};
    }
    return quiet(t);
  });
  EXPECT_EQ(count(teams, Team::kOneThread), 0);
}

TEST(TeamChoice, AStartOnABusyMachineMovesToOneThreadBySevenRuns) {
  TeamChoice choice;
  const std::vector<Team> teams = drive(choice, 7, busy);
  // Full (cold), full twice (busy), then the try: one thread cold and three counted runs, which
  // win.
  EXPECT_EQ(teams, (std::vector<Team>{Team::kFull, Team::kFull, Team::kFull, Team::kOneThread,
                                      Team::kOneThread, Team::kOneThread, Team::kOneThread}));
  EXPECT_EQ(choice.current(), Team::kOneThread);
  const std::vector<Team> loaded = drive(choice, 500, busy);
  EXPECT_EQ(choice.current(), Team::kOneThread);
  // It still tries the full team (one run a try), ever less often: twice at most in the last
  // 128 runs.
  EXPECT_GE(count(loaded, Team::kFull), 5);
  EXPECT_LE(count(last(loaded, 128), Team::kFull), 2);
}

TEST(TeamChoice, ALoadThatStartsLaterIsFollowedWithinSixRuns) {
  TeamChoice choice;
  drive(choice, 200, quiet);
  const std::vector<Team> teams = drive(choice, 6, busy);
  // Two busy runs, then the try (a cold run and three more) held against them alone.
  EXPECT_EQ(teams, (std::vector<Team>{Team::kFull, Team::kFull, Team::kOneThread, Team::kOneThread,
                                      Team::kOneThread, Team::kOneThread}));
  EXPECT_EQ(choice.current(), Team::kOneThread);
}

TEST(TeamChoice, LoneSlowRunsOnAQuietMachineTryNothing) {
  // A shared VM's moments: one run in ten takes 2.2x (the calling thread keeps its core, or not),
  // the next is quiet again. The one-thread plan would cost 1.7x on each of its try's runs.
  TeamChoice choice;
  int run = 0;
  const std::vector<Team> teams = drive(choice, 500, [&](Team t) {
    if (t == Team::kFull && ++run % 10 == 0) return RunTime{5.3, run % 20 == 0 ? 0.98 : 0.5};
    return quiet(t);
  });
  EXPECT_EQ(count(teams, Team::kOneThread), 0);
  EXPECT_EQ(choice.current(), Team::kFull);
}

TEST(TeamChoice, ATryOfTheOtherPlanEndsARunOfBusyRuns) {
  // A light load where the full team still wins: after a lost try, the next busy run alone (held
  // back by the interval, then one busy run) starts no try; two in a row after the wait do.
  TeamChoice choice;
  drive(choice, 20, quiet);
  const std::vector<Team> teams = drive(choice, 8, [](Team t) {
    return t == Team::kFull ? RunTime{3.0, 0.8} : RunTime{4.0, 0.9};
  });
  // Busy twice, the try (cold + three: lost), then full-team runs until the interval has passed.
  EXPECT_EQ(teams,
            (std::vector<Team>{Team::kFull, Team::kFull, Team::kOneThread, Team::kOneThread,
                               Team::kOneThread, Team::kOneThread, Team::kFull, Team::kFull}));
  EXPECT_EQ(choice.current(), Team::kFull);
}

TEST(TeamChoice, ManyCoresWithOneTakenKeepTheFullTeam) {
  // 16 threads, one busy-loop process: the full team is slowed down and still far ahead.
  TeamChoice choice;
  const std::vector<Team> teams = drive(choice, 600, [](Team t) {
    return t == Team::kFull ? RunTime{5.0, 0.7} : RunTime{40.0, 0.9};
  });
  EXPECT_EQ(choice.current(), Team::kFull);
  EXPECT_LE(count(last(teams, 128), Team::kOneThread), 2 * TeamChoice::kTryRuns);
}

TEST(TeamChoice, ALuckyOneThreadRunDoesNotDecideATry) {
  // The median of three: one fast run of the one-thread plan among slow ones does not win.
  TeamChoice choice;
  drive(choice, 20, quiet);
  int one_thread_runs = 0;
  const std::vector<Team> teams = drive(choice, 200, [&](Team t) {
    if (t == Team::kFull) return RunTime{5.0, 0.6};  // busy-looking, yet faster
    return RunTime{++one_thread_runs % 3 == 0 ? 2.0 : 8.0, 0.6};
  });
  EXPECT_EQ(choice.current(), Team::kFull);
  EXPECT_LE(count(last(teams, 128), Team::kOneThread), 2 * (TeamChoice::kTryRuns + 1));
}

TEST(TeamChoice, ALuckyFullTeamRunOnABusyMachineCostsAFewRunsAtMost) {
  TeamChoice choice;
  drive(choice, 20, busy);
  ASSERT_EQ(choice.current(), Team::kOneThread);
  int full_runs = 0;
  const std::vector<Team> teams = drive(choice, 400, [&](Team t) {
    if (t == Team::kOneThread) return busy(t);
    return RunTime{++full_runs % 4 == 0 ? 2.0 : 15.8, 0.5};
  });
  // Each lucky run costs one busy full-team run before the one-thread plan is tried again.
  EXPECT_GE(count(teams, Team::kOneThread), 360);
}

TEST(TeamChoice, ASlowdownAloneIsEnoughWhenTheCallingThreadKeepsItsCore) {
  // The calling thread spins on its own core while its helper shares the other with the load.
  TeamChoice choice;
  drive(choice, 20, quiet);
  drive(choice, 20, [](Team t) {
    return t == Team::kFull ? RunTime{15.8, 1.0} : RunTime{4.3, 1.0};
  });
  EXPECT_EQ(choice.current(), Team::kOneThread);
}

TEST(TeamChoice, TheFullTeamComesBackWithinTheIntervalOnceTheLoadEnds) {
  TeamChoice choice;
  drive(choice, 50, quiet);
  drive(choice, 500, busy);
  ASSERT_EQ(choice.current(), Team::kOneThread);
  int runs = 0;
  while (choice.current() != Team::kFull && runs <= TeamChoice::kMaxInterval) {
    drive(choice, 1, quiet);
    ++runs;
  }
  EXPECT_EQ(choice.current(), Team::kFull);
  EXPECT_LE(runs, TeamChoice::kMaxInterval + TeamChoice::kTryRuns);
  EXPECT_EQ(choice.interval(), TeamChoice::kFirstInterval) << "a win starts the interval over";
  // Quiet again: no more tries of the one-thread plan.
  EXPECT_EQ(count(drive(choice, 300, quiet), Team::kOneThread), 0);
}

TEST(TeamChoice, WhileOtherTasksRunTheFullTeamIsTriedOnlyEvery64Runs) {
  int asked = 0;
  TeamChoice choice([&] {
    ++asked;
    return true;
  });
  const std::vector<Team> teams = drive(choice, 300, busy);
  EXPECT_EQ(choice.current(), Team::kOneThread);
  // Three full-team runs (the cold one, two busy ones) before the try, then one try per 64 runs.
  EXPECT_LE(count(teams, Team::kFull), 3 + 300 / TeamChoice::kMaxInterval);
  EXPECT_GE(count(teams, Team::kFull), 3) << "it still tries";
  EXPECT_GT(asked, 0);
  EXPECT_LE(asked, 40) << "asked only when a try is due";
}

TEST(TeamChoice, WhenNoOtherTaskRunsTheFullTeamIsTriedSoon) {
  TeamChoice choice([] { return false; });
  drive(choice, 7, busy);
  ASSERT_EQ(choice.current(), Team::kOneThread);
  ASSERT_EQ(choice.interval(), TeamChoice::kFirstInterval);
  int runs = 0;
  while (choice.current() != Team::kFull && runs < 100) {
    drive(choice, 1, quiet);
    ++runs;
  }
  EXPECT_EQ(choice.current(), Team::kFull);
  EXPECT_LE(runs, TeamChoice::kFirstInterval + 1);
}

TEST(TeamChoice, ALightLoadWhereTheFullTeamStillWinsIsTriedEverLessOften) {
  TeamChoice choice;
  const std::vector<Team> teams = drive(choice, 600, [](Team t) {
    return t == Team::kFull ? RunTime{3.0, 0.8} : RunTime{4.0, 0.9};
  });
  EXPECT_EQ(choice.current(), Team::kFull);
  EXPECT_EQ(choice.interval(), TeamChoice::kMaxInterval);
  EXPECT_LE(count(last(teams, 128), Team::kOneThread), 2 * TeamChoice::kTryRuns);
}

TEST(RunnableTasks, ReadsTheRunnableCountOfProcLoadavgAndRefusesOtherText) {
  EXPECT_EQ(runnable_tasks_of("0.61 0.83 0.90 3/245 12345\n"), 3);
  EXPECT_EQ(runnable_tasks_of("12.00 9.50 4.20 17/1024 99"), 17);
  EXPECT_EQ(runnable_tasks_of(""), std::nullopt);
  EXPECT_EQ(runnable_tasks_of("0.61 0.83 0.90"), std::nullopt);
  EXPECT_EQ(runnable_tasks_of("0.61 0.83 0.90 x/245 1"), std::nullopt);
  EXPECT_EQ(runnable_tasks_of("0.61 0.83 0.90 -1/245 1"), std::nullopt);
  EXPECT_EQ(runnable_tasks_of("0.61 0.83 0.90 3 245"), std::nullopt);
  // This machine's: at least the calling thread runs.
  const std::optional<int> here = runnable_tasks();
  ASSERT_TRUE(here.has_value());
  EXPECT_GE(*here, 1);
}

}  // namespace
}  // namespace kiln::hal::cpu
