// `allocmark history` (history.cpp; docs/history.md) and what `gate --history` shares with it: the
// flags that label a run for the history, and adding a results folder under them.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "harness/cli/common.h"
#include "harness/history/ingest.h"

namespace allocmark::cli {

Subcommand add_history_command(CLI::App& app);

// --commit, --branch, --time, --testbed: what the history files a run under.
void add_history_label_flags(CLI::App* cmd, history::RunLabels& labels);

// Adds RESULTS to the history at DB under `labels`, saying on stderr what it added (or that the
// file already held the run). `who` prefixes the message ("allocmark history", "allocmark gate").
void add_to_history(const std::string& db, const std::string& results, const history::RunLabels& labels,
                    const std::string& who);

}  // namespace allocmark::cli
