// A setting's key (its row's name in ALLOCMARK_SETTINGS: the [matrix] key and its field in
// meta.json's matrix) as a constant, for a reader that shows a recorded value as it was written
// rather than as Settings would read it (the report: a folder from before a setting shows none).
#pragma once

#include "harness/settings/settings.h"

namespace allocmark::matrix::setting_key {

#define ALLOCMARK_SETTING_KEY(type, name, ...) inline constexpr const char name[] = #name;
ALLOCMARK_SETTINGS(ALLOCMARK_SETTING_KEY)
#undef ALLOCMARK_SETTING_KEY

}  // namespace allocmark::matrix::setting_key
