// The results model's grouping (Model::group): cells, or their phases or nodes, counted into rows
// by the dimensions asked for, each row's metrics summarised over its repetitions, and each row
// labelled by plain names unless two rows would otherwise read the same; and the order of the
// model's cells (Model::order_releases), which the groups' order of first appearance follows.
#include "harness/results/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "allocators/releases/releases.h"
#include "harness/matrix/plan.h"
#include "harness/record/cell.h"
#include "harness/record/record_keys.h"
#include "harness/results/model_labels.h"

namespace allocmark::results {
using nlohmann::json;

namespace {

struct GroupBuilder {
  std::vector<long long> key;  // per dimension: the interned value; then the host when not a dimension
  Group group;
  std::array<std::vector<double>, kMetricCount> samples;
  std::map<std::size_t, std::vector<double>> workload_samples;  // by workload metric index
  detail::CommonIdentity identity;
  // Per pooling-checked dimension (workload, threads, allocator) not asked for: the values seen.
  std::array<std::set<long long>, 3> unasked;
};

constexpr std::array<Dimension, 3> kPoolingChecked{Dimension::workload, Dimension::threads, Dimension::allocator};

bool has(const std::vector<Dimension>& by, Dimension d) { return std::find(by.begin(), by.end(), d) != by.end(); }

// One grouping of a model's cells: Model::group's steps, one method each.
class Grouper {
 public:
  Grouper(const std::vector<CellResult>& cells, const std::vector<CellIdentity>& identities,
          const std::vector<std::string>& workload_metric_names, const std::vector<Dimension>& by, const CellFilter& filter);
  // Counts cells_[i] (its status, and its phases or the whole cell) where the filter keeps it.
  void add_cell(std::size_t i);
  Grouping finish();

 private:
  bool kept(const CellResult& cell) const;
  long long string_id(const std::string& s);
  GroupBuilder& builder_for(const CellResult& cell, const std::string& phase, long long node = -1);
  void count_cell(GroupBuilder& b, const CellResult& cell);
  void add_samples(GroupBuilder& b, const CellResult& cell, const PhaseValues& phase);
  void add_phase(const CellResult& cell, const PhaseValues& phase);
  std::vector<json> plain_values(const GroupBuilder& b) const;
  void label_groups();
  void tell_apart(const std::vector<std::size_t>& members);
  std::vector<PooledDimension> pooled() const;
  Group summarise(GroupBuilder& b, std::set<std::size_t>& workload_metrics_present) const;

  const std::vector<CellResult>& cells_;
  const std::vector<CellIdentity>& identities_;
  const std::vector<std::string>& workload_metric_names_;
  const std::vector<Dimension>& by_;
  const CellFilter& filter_;
  const bool by_phase_, by_host_, by_node_;
  std::array<bool, 3> unasked_{};  // per kPoolingChecked: not among the dimensions asked for

  // Interned values of each dimension; labels come at the end, once all collisions are known.
  detail::Disambiguator workloads_, allocators_;
  std::vector<std::size_t> workload_slot_, allocator_slot_;  // per identity
  std::vector<std::string> strings_;                          // phase, backend and host values
  std::unordered_map<std::string, long long> string_ids_;

  std::vector<GroupBuilder> builders_;
  std::map<std::vector<long long>, std::size_t> index_;
  std::size_t last_builder_ = 0;
  std::vector<std::size_t> cell_groups_;
  bool host_column_ = false;
};

Grouper::Grouper(const std::vector<CellResult>& cells, const std::vector<CellIdentity>& identities,
                 const std::vector<std::string>& workload_metric_names, const std::vector<Dimension>& by,
                 const CellFilter& filter)
    : cells_(cells),
      identities_(identities),
      workload_metric_names_(workload_metric_names),
      by_(by),
      filter_(filter),
      by_phase_(has(by, Dimension::phase)),
      by_host_(has(by, Dimension::host)),
      by_node_(has(by, Dimension::node)),
      workload_slot_(identities.size()),
      allocator_slot_(identities.size()),
      cell_groups_(cells.size(), Grouping::kNoGroup) {
  for (std::size_t i = 0; i < identities_.size(); ++i) {
    const CellIdentity& id = identities_[i];
    workload_slot_[i] = workloads_.add(detail::instance_label(id.workload, id.params), detail::attributes_of(id.params));
    auto attrs = detail::attributes_of(id.env);
    attrs["library"] = id.preload;
    allocator_slot_[i] = allocators_.add(id.allocator, std::move(attrs));
  }
  for (std::size_t k = 0; k < kPoolingChecked.size(); ++k) unasked_[k] = !has(by, kPoolingChecked[k]);
}

bool Grouper::kept(const CellResult& cell) const {
  const CellIdentity& id = identities_[cell.identity];
  auto in = [](const auto& list, const auto& v) { return list.empty() || std::find(list.begin(), list.end(), v) != list.end(); };
  const bool workload = in(filter_.workloads, id.workload) || in(filter_.workloads, detail::instance_label(id.workload, id.params));
  return workload && in(filter_.allocators, id.allocator) && in(filter_.threads, cell.threads);
}

long long Grouper::string_id(const std::string& s) {
  auto [it, inserted] = string_ids_.emplace(s, static_cast<long long>(strings_.size()));
  if (inserted) strings_.push_back(s);
  return it->second;
}

GroupBuilder& Grouper::builder_for(const CellResult& cell, const std::string& phase, long long node) {
  const CellIdentity& id = identities_[cell.identity];
  std::vector<long long> key;
  for (Dimension d : by_) switch (d) {
      case Dimension::workload: key.push_back(static_cast<long long>(workload_slot_[cell.identity])); break;
      case Dimension::threads: key.push_back(cell.threads); break;
      case Dimension::allocator: key.push_back(static_cast<long long>(allocator_slot_[cell.identity])); break;
      case Dimension::phase: key.push_back(string_id(phase)); break;
      case Dimension::backend: key.push_back(string_id(id.backend)); break;
      case Dimension::host: key.push_back(string_id(id.host)); break;
      case Dimension::node: key.push_back(node); break;
    }
  // Cells from different machines are never repetitions of each other, asked for or not.
  if (!by_host_) key.push_back(string_id(id.host));
  auto [it, inserted] = index_.emplace(key, builders_.size());
  if (inserted) builders_.push_back(GroupBuilder{std::move(key), {}, {}, {}, {}});
  last_builder_ = it->second;
  return builders_[it->second];
}

void Grouper::count_cell(GroupBuilder& b, const CellResult& cell) {
  const CellIdentity& id = identities_[cell.identity];
  const long long checked[3] = {static_cast<long long>(workload_slot_[cell.identity]), cell.threads,
                                static_cast<long long>(allocator_slot_[cell.identity])};
  for (std::size_t k = 0; k < 3; ++k)
    if (unasked_[k]) b.unasked[k].insert(checked[k]);
  b.group.cells++;
  b.group.statuses[cell.status]++;
  if (cell.error) {
    if (b.group.errors.size() < kMaxErrorsListed) b.group.errors.push_back(*cell.error);
    else b.group.errors_not_listed++;
  }
  // The cell's fields under their record keys (the codec's), then what the record adds.
  using record::CellField;
  b.identity.add(record::record_key(CellField::allocator), json(id.allocator));
  b.identity.add(record::record_key(CellField::backend), json(id.backend));
  b.identity.add(record::record_key(CellField::workload), json(id.workload));
  b.identity.add(record::record_key(CellField::params), id.params);
  b.identity.add(record::record_key(CellField::env), id.env);
  b.identity.add(record::record_key(CellField::library), json(id.preload));
  if (!id.host.empty()) b.identity.add(record::kRecordHost, json(id.host));
  if (cell.library) b.identity.add(record::kRecordLibrary, json(*cell.library));
  if (cell.allocator_version) b.identity.add(record::kRecordAllocatorVersion, json(*cell.allocator_version));
}

void Grouper::add_samples(GroupBuilder& b, const CellResult& cell, const PhaseValues& phase) {
  for (const auto& m : metric_table())
    if (auto v = metric_value(m.metric, cell, phase)) b.samples[static_cast<std::size_t>(m.metric)].push_back(*v);
  for (const auto& [index, v] : phase.workload) b.workload_samples[index].push_back(v);
}

// One row's worth of a phase (or whole cell): itself, or with the node dimension one row per node.
void Grouper::add_phase(const CellResult& cell, const PhaseValues& phase) {
  if (!by_node_ || phase.nodes.empty()) {
    GroupBuilder& b = builder_for(cell, phase.name);
    count_cell(b, cell);
    add_samples(b, cell, phase);
    return;
  }
  for (const auto& node : phase.nodes) {
    GroupBuilder& b = builder_for(cell, phase.name, node.node);
    count_cell(b, cell);
    add_samples(b, cell, node_view(phase, node));
  }
}

void Grouper::add_cell(std::size_t i) {
  const CellResult& cell = cells_[i];
  if (!kept(cell)) return;
  // A cell that is not ok contributes its status and error, never its partial measurements.
  if (!by_phase_) {
    if (cell.ok() && !cell.phases.empty()) add_phase(cell, whole_cell(cell));
    else count_cell(builder_for(cell, std::string(kCellPhase)), cell);
    cell_groups_[i] = last_builder_;
    return;
  }
  if (!cell.ok() || cell.phases.empty()) count_cell(builder_for(cell, std::string(kCellPhase)), cell);
  cell_groups_[i] = last_builder_;
  if (!cell.ok()) return;
  for (std::size_t p = 0; p < cell.phases.size(); ++p) {
    add_phase(cell, cell.phases[p]);
    if (p == 0) cell_groups_[i] = last_builder_;
  }
}

std::vector<json> Grouper::plain_values(const GroupBuilder& b) const {
  std::vector<json> values;
  for (std::size_t i = 0; i < by_.size(); ++i) {
    long long v = b.key[i];
    switch (by_[i]) {
      case Dimension::workload: values.push_back(workloads_.name(static_cast<std::size_t>(v))); break;
      case Dimension::allocator: values.push_back(allocators_.name(static_cast<std::size_t>(v))); break;
      case Dimension::threads: values.push_back(v); break;
      case Dimension::node: values.push_back(v < 0 ? json("-") : json(v)); break;
      default: values.push_back(strings_[static_cast<std::size_t>(v)]); break;
    }
  }
  return values;
}

// Labels: plain names, qualified only where two groups would otherwise read the same.
void Grouper::label_groups() {
  std::map<std::vector<json>, std::vector<std::size_t>> by_plain_label;
  for (std::size_t g = 0; g < builders_.size(); ++g) {
    builders_[g].group.values = plain_values(builders_[g]);
    by_plain_label[builders_[g].group.values].push_back(g);
  }
  for (const auto& [label, members] : by_plain_label)
    if (members.size() >= 2) tell_apart(members);
}

// Groups that read the same: each dimension on which they differ qualified, and the host made a
// column where they are of different hosts.
void Grouper::tell_apart(const std::vector<std::size_t>& members) {
  for (std::size_t i = 0; i < by_.size(); ++i) {
    std::set<long long> distinct;
    for (std::size_t g : members) distinct.insert(builders_[g].key[i]);
    if (distinct.size() < 2) continue;
    for (std::size_t g : members) {
      auto slot = static_cast<std::size_t>(builders_[g].key[i]);
      if (by_[i] == Dimension::workload) builders_[g].group.values[i] = workloads_.qualified(slot);
      if (by_[i] == Dimension::allocator) builders_[g].group.values[i] = allocators_.qualified(slot);
    }
  }
  if (!by_host_) {
    std::set<long long> hosts;
    for (std::size_t g : members) hosts.insert(builders_[g].key.back());
    host_column_ = host_column_ || hosts.size() > 1;
  }
}

std::vector<PooledDimension> Grouper::pooled() const {
  std::vector<PooledDimension> out;
  for (std::size_t k = 0; k < kPoolingChecked.size(); ++k) {
    std::set<long long> together;
    for (const auto& b : builders_)
      if (b.unasked[k].size() > 1) together.insert(b.unasked[k].begin(), b.unasked[k].end());
    if (together.empty()) continue;
    PooledDimension pooled{kPoolingChecked[k], {}};
    for (long long v : together) {
      auto slot = static_cast<std::size_t>(v);
      pooled.values.push_back(k == 0 ? workloads_.qualified(slot) : k == 1 ? std::to_string(v) : allocators_.qualified(slot));
    }
    if (kPoolingChecked[k] != Dimension::threads) std::sort(pooled.values.begin(), pooled.values.end());  // by name, not by first seen
    out.push_back(std::move(pooled));
  }
  return out;
}

Group Grouper::summarise(GroupBuilder& b, std::set<std::size_t>& workload_metrics_present) const {
  if (host_column_) b.group.values.push_back(strings_[static_cast<std::size_t>(b.key.back())]);
  for (std::size_t m = 0; m < kMetricCount; ++m) b.group.metrics[m] = spread_of(std::move(b.samples[m]));
  for (auto& [index, samples] : b.workload_samples) {
    b.group.workload_metrics[workload_metric_names_[index]] = spread_of(std::move(samples));
    workload_metrics_present.insert(index);
  }
  b.group.identity = b.identity.result();
  return std::move(b.group);
}

Grouping Grouper::finish() {
  label_groups();
  Grouping out;
  out.dimensions = by_;
  out.cell_groups = std::move(cell_groups_);
  out.pooled = pooled();
  if (host_column_) out.dimensions.push_back(Dimension::host);
  std::set<std::size_t> workload_metrics_present;
  for (auto& b : builders_) out.groups.push_back(summarise(b, workload_metrics_present));
  for (std::size_t index : workload_metrics_present) out.workload_metrics.push_back(workload_metric_names_[index]);
  std::sort(out.workload_metrics.begin(), out.workload_metrics.end(), detail::natural_less);
  return out;
}

}  // namespace

void Model::order_releases() {
  namespace rel = allocators::releases;
  std::map<std::string, std::vector<std::size_t>> places;  // by everything but the release
  std::vector<rel::Release> release(cells_.size());
  for (std::size_t i = 0; i < cells_.size(); ++i) {
    const CellIdentity& id = identities_[cells_[i].identity];
    const matrix::ReleaseName rn = matrix::split_release(id.allocator);
    if (!rn.named) continue;
    release[i] = {id.backend, rn.version};
    places[id.backend + '\n' + id.workload + '\n' + id.params.dump() + '\n' + std::to_string(cells_[i].threads) + '\n' +
           id.host]
        .push_back(i);
  }
  for (const auto& [unused, at] : places) {
    std::vector<std::size_t> order = at;  // stable: one release's repetitions keep their file order
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rel::release_less(release[a], release[b]); });
    if (order == at) continue;
    std::vector<CellResult> moved;
    for (std::size_t i : order) moved.push_back(std::move(cells_[i]));
    for (std::size_t k = 0; k < at.size(); ++k) cells_[at[k]] = std::move(moved[k]);
  }
}

Grouping Model::group(const std::vector<Dimension>& by, const CellFilter& filter) const {
  for (std::size_t i = 0; i < by.size(); ++i)
    if (std::find(by.begin(), by.begin() + i, by[i]) != by.begin() + i)
      throw ResultsError(fmt::format("'{}' is listed twice in the grouping", dimension_name(by[i])));
  Grouper grouper(cells_, identities_, workload_metric_names_, by, filter);
  for (std::size_t i = 0; i < cells_.size(); ++i) grouper.add_cell(i);
  return grouper.finish();
}

}  // namespace allocmark::results
