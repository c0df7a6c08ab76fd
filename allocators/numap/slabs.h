// Layer 4, small objects: 64 KiB slabs (chunks of each node's slab Slot) carved into objects of
// one small class. Slab headers live outside the slab, in an array indexed by the slab's chunk
// index, so a free finds its slab by address arithmetic alone. Each (node, small class) has a
// Central: a lock and the list of its slabs that have free objects. Thread caches move objects
// to and from a Central in batches, so the lock is taken once per batch, not per object.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocators/numap/handoff.h"
#include "allocators/numap/lock.h"
#include "allocators/numap/size_classes.h"
#include "allocators/numap/transfer_cache.h"
#include "allocators/numap/write_probe.h"

namespace numap {

struct SlabMeta {
  void* free = nullptr;         // intrusive list of freed objects
  std::uint32_t nfree = 0;      // objects free (list + never handed out)
  std::uint32_t bump = 0;       // objects never handed out start at index bump
  std::uint16_t cls = 0;
  std::uint16_t capacity = 0;   // objects in the slab
  bool in_partial = false;
  SlabMeta* prev = nullptr;
  SlabMeta* next = nullptr;
};

struct Central {
  Lock lock;
  SlabMeta* partial = nullptr;  // slabs with at least one free object
  std::atomic<std::uint64_t> in_use_bytes{0}, allocs{0}, frees{0};
  // Bytes of the slabs this class holds (from the slab's creation to its release): beside
  // in_use_bytes, what the class's free objects pin (numap_class_stats' mapped_bytes).
  std::atomic<std::uint64_t> slab_bytes{0};
  TransferCache transfer;  // under the lock
  // Whole batches outside the lock (NUMAP_HANDOFF_BYTES; issue 45): overflows push, refills take.
  Handoff handoff;
  // Classes of objects above a page (Heap::slab_populate; issue 41): whether the program writes
  // their slabs through.
  WriteProbe written;

  // Pops up to n objects into a singly linked list (*head); returns how many.
  std::uint32_t pop(char* slab_base_of_index0, std::uint64_t slab_bytes, SlabMeta* metas, void** head, std::uint32_t n);
};

// Links object p into its slab; returns true when the slab became entirely free (the caller then
// unlinks it, under the same lock, with central_unlink, and gives its chunk back).
bool slab_push(SlabMeta* s, void* p);
void central_link(Central* c, SlabMeta* s);
void central_unlink(Central* c, SlabMeta* s);

}  // namespace numap
