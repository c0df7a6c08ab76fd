// A phase figure's key in a record (its row's phase_path in ALLOCMARK_PHASE_FIELDS) as a constant,
// for the one message outside phase_record() and the model that carries phase figures: a program's
// exit event, which the preload report writes (also where nothing may allocate) and the driver
// reads into the program's last phase.
#pragma once

#include "harness/record/fields.h"

namespace allocmark::record::phase_key {

#define ALLOCMARK_PHASE_KEY(kind, name, type, unit, fold, phase_path, node_path, ...) \
  inline constexpr const char name[] = phase_path;
ALLOCMARK_PHASE_FIELDS(ALLOCMARK_PHASE_KEY)
#undef ALLOCMARK_PHASE_KEY

}  // namespace allocmark::record::phase_key
