#include "kiln/runtime/stages.h"

#include <algorithm>
#include <set>

namespace kiln::runtime {

std::vector<Stage> plan_stages(const module::ModuleContents& module) {
  const auto dispatch_count = static_cast<int32_t>(module.dispatches.size());
  std::vector<Stage> stages(1);
  auto is_control = [&](int32_t d) {
    return module::is_host_dispatch(module, module.dispatches[d]);
  };
  for (int32_t d = 0; d < dispatch_count; ++d) {
    const bool starts =
        !module.dispatches[d].data_symbols.empty() || is_control(d) || (d > 0 && is_control(d - 1));
    if (starts && d > 0) {
      stages.back().end = d;
      stages.emplace_back().first = d;
    }
    if (is_control(d)) {
      stages.back().control = true;
      continue;
    }
    stages.back().binds_data =
        stages.back().binds_data ||
        (d == stages.back().first && !module.dispatches[d].data_symbols.empty());
  }
  stages.back().end = dispatch_count;

  // The stage that produces each value (-1: not produced by a dispatch).
  std::vector<int32_t> produced_in(module.values.size(), -1);
  for (size_t s = 0; s < stages.size(); ++s) {
    for (int32_t d = stages[s].first; d < stages[s].end; ++d) {
      for (int32_t out : module.dispatches[d].outputs) produced_in[out] = static_cast<int32_t>(s);
    }
  }
  std::vector<bool> is_graph_output(module.values.size(), false);
  for (int32_t out : module.outputs) is_graph_output[out] = true;
  // Values read by a stage after the one that produces them.
  std::vector<bool> crosses(module.values.size(), false);
  for (size_t s = 0; s < stages.size(); ++s) {
    std::set<int32_t> values, inputs;
    for (int32_t d = stages[s].first; d < stages[s].end; ++d) {
      for (int32_t in : module.dispatches[d].inputs) {
        if (in < 0) continue;
        values.insert(in);
        const auto kind = module.values[in].kind;
        if (kind == module::ValueKind::kInput || (kind == module::ValueKind::kIntermediate &&
                                                  produced_in[in] != static_cast<int32_t>(s))) {
          inputs.insert(in);
          crosses[in] = true;
        }
      }
      for (int32_t out : module.dispatches[d].outputs) values.insert(out);
    }
    stages[s].values.assign(values.begin(), values.end());
    stages[s].inputs.assign(inputs.begin(), inputs.end());
  }
  for (size_t s = 0; s < stages.size(); ++s) {
    std::set<std::string> symbols;
    for (int32_t v : stages[s].values) {
      if (produced_in[v] == static_cast<int32_t>(s) && (crosses[v] || is_graph_output[v])) {
        stages[s].outputs.push_back(v);
      }
      for (const DimExpr& d : module.values[v].shape) {
        for (std::string& symbol : d.symbols()) symbols.insert(std::move(symbol));
      }
      for (const DimExpr& d : module.values[v].known_values) {
        for (std::string& symbol : d.symbols()) symbols.insert(std::move(symbol));
      }
    }
    for (int32_t d = stages[s].first; d < stages[s].end; ++d) {
      symbols.insert(module.dispatches[d].data_symbols.begin(),
                     module.dispatches[d].data_symbols.end());
    }
    stages[s].symbols.assign(symbols.begin(), symbols.end());
  }
  return stages;
}

}  // namespace kiln::runtime
