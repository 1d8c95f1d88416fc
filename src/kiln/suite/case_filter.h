// `kiln test-suite --filter`: selects cases by name ("model[/data_set][/variant][/sizes]", e.g.
// "resnet50-v1-12/bound/N=3"). A pattern with '*' or '?' is a glob over the whole name ('*'
// crosses '/'); a pattern without them matches names that contain it. Several patterns select
// the union; none selects everything. Exclusions (`--exclude`, the same kind of patterns) then
// drop every name any of them matches.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::suite {

class CaseFilter {
 public:
  CaseFilter() = default;
  explicit CaseFilter(std::vector<std::string> patterns, std::vector<std::string> exclusions = {});

  bool empty() const { return globs_.empty() && excluded_.empty(); }
  // Whether `name` is selected.
  bool matches(std::string_view name) const;
  // Whether some name starting with `prefix` could be selected: lets the suite skip a model
  // (import and compile) when no case of it can match.
  bool may_match_prefix(std::string_view prefix) const;

 private:
  std::vector<std::string> globs_;
  std::vector<std::string> excluded_;
};

}  // namespace kiln::suite
