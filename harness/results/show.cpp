#include "harness/results/show.h"

#include "harness/results/reporters/reporter.h"

namespace allocmark::results {

std::string render_table(const std::vector<nlohmann::json>& records) {
  return render_report(Model::from_records(records), "table");
}

}  // namespace allocmark::results
