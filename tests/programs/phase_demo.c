/* A program cell's test subject (tests/programs_test.py): marks three phases and holds a known
 * amount of memory in each, then ends as its first argument says: ok, crash, hang, exit3. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The documented snippet: write the mark, wait for the driver's answer (exact phase edges). */
static void phase(const char* name) {
  const char* fd = getenv("ALLOCMARK_PHASE_FD");
  if (!fd) return;
  char answer[8];
  dprintf(atoi(fd), "phase %s\n", name);
  (void)!read(atoi(fd), answer, sizeof answer);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "ok";
  phase("small");
  char* small = malloc(8 << 20);
  memset(small, 1, 8 << 20);
  phase("large");
  /* volatile: the compiler may not drop an allocation whose pages it never sees read */
  char* volatile large = malloc(96 << 20);
  for (size_t i = 0; i < (96u << 20); i += 4096) large[i] = 2;
  free(large);
  phase("after");
  if (strcmp(mode, "crash") == 0) raise(SIGSEGV);
  if (strcmp(mode, "hang") == 0)
    for (;;) pause();
  printf("checksum %d\n", small[12345]);
  free(small);
  return strcmp(mode, "exit3") == 0 ? 3 : 0;
}
