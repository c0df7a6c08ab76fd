/* For native_api_test: a numap_stats as a library built before version 9 answers it (its struct
 * ends before reused_bytes), so the harness's reading of an older build can be checked without
 * building one. Only numap_stats is exported; malloc stays glibc's. */
#include <stddef.h>
#include <string.h>

#include "allocators/numap/include/numap.h"

size_t numap_stats(struct numap_stats* out, struct numap_class_stats* classes, size_t max_classes) {
  (void)classes;
  (void)max_classes;
  struct numap_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = (uint32_t)offsetof(struct numap_stats, reused_bytes); /* version 8's size */
  s.version = 8;
  s.nodes = 1;
  s.moved_bytes = 5 << 20;
  s.borrowed_bytes = 3 << 20;
  size_t n = out->struct_size != 0 && out->struct_size < s.struct_size ? out->struct_size : s.struct_size;
  memcpy(out, &s, n);
  return 0;
}
