#include "allocators/numap/slabs.h"

namespace numap {

void central_link(Central* c, SlabMeta* s) {
  s->prev = nullptr;
  s->next = c->partial;
  if (c->partial != nullptr) c->partial->prev = s;
  c->partial = s;
  s->in_partial = true;
}

void central_unlink(Central* c, SlabMeta* s) {
  if (s->prev != nullptr) s->prev->next = s->next; else c->partial = s->next;
  if (s->next != nullptr) s->next->prev = s->prev;
  s->prev = s->next = nullptr;
  s->in_partial = false;
}

std::uint32_t Central::pop(char* slab_base, std::uint64_t slab_bytes, SlabMeta* metas, void** head, std::uint32_t n) {
  std::uint32_t got = 0;
  void* list = *head;
  while (got < n && partial != nullptr) {
    SlabMeta* s = partial;
    char* base = slab_base + static_cast<std::uint64_t>(s - metas) * slab_bytes;
    const std::uint32_t size = kSmallSize[s->cls];
    while (got < n && s->nfree > 0) {
      void* obj;
      if (s->free != nullptr) {
        obj = s->free;
        s->free = *static_cast<void**>(obj);
      } else {
        obj = base + static_cast<std::uint64_t>(s->bump) * size;
        ++s->bump;
      }
      --s->nfree;
      *static_cast<void**>(obj) = list;
      list = obj;
      ++got;
    }
    if (s->nfree == 0) central_unlink(this, s);
  }
  *head = list;
  return got;
}

bool slab_push(SlabMeta* s, void* p) {
  *static_cast<void**>(p) = s->free;
  s->free = p;
  ++s->nfree;
  return s->nfree == s->capacity;
}

}  // namespace numap
