// Start-up footprint of whatever malloc is in the process (issue 24, target 3): a program that
// allocates nothing of its own, or exactly one block, then reports the kernel's view of its memory
// from /proc/self/status. Only system calls (open, read, write), never stdio or any other libc
// function that allocates, so without an argument the allocator is never called at all.
//   numap_footprint              allocate nothing (malloc is never called)
//   numap_footprint stdio        the line written with printf: libc mallocs stdout's buffer, the
//                                one allocation of a C program that allocates nothing itself
//   numap_footprint N            one malloc(N), every byte written (the block stays allocated)
//   numap_footprint N smaps      also copy /proc/self/smaps to stdout (where each page comes from)
// Output: one line "VmRSS=<kB> RssAnon=<kB> RssFile=<kB> RssShmem=<kB> Threads=<n>" (after
// "stdio:" in that mode).
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char buf[1 << 16];

static long field(const char* text, const char* name) {
  const char* p = strstr(text, name);
  if (p == NULL) return -1;
  p += strlen(name);
  while (*p == ' ' || *p == '\t' || *p == ':') ++p;
  long v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
  return v;
}

static void put(const char* s) { (void)!write(1, s, strlen(s)); }

static void put_long(long v) {
  char d[24];
  char* p = d + sizeof d;
  *--p = '\0';
  do {
    *--p = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  put(p);
}

static long slurp(const char* path, char* out, long cap) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  long len = 0;
  for (long n; len < cap - 1 && (n = read(fd, out + len, (size_t)(cap - 1 - len))) > 0;) len += n;
  close(fd);
  out[len] = '\0';
  return len;
}

int main(int argc, char** argv) {
  const int use_stdio = argc > 1 && strcmp(argv[1], "stdio") == 0;
  if (argc > 1 && !use_stdio) {
    long n = 0;
    for (const char* p = argv[1]; *p >= '0' && *p <= '9'; ++p) n = n * 10 + (*p - '0');
    char* volatile block = malloc((size_t)n);
    if (block == NULL) return 1;
    memset(block, 1, (size_t)n);
  }
  if (slurp("/proc/self/status", buf, sizeof buf) < 0) return 1;
  const char* names[] = {"VmRSS", "RssAnon", "RssFile", "RssShmem", "Threads"};
  if (use_stdio) {
    // The figures before printf's buffer exists would hide it: print once to allocate it, then
    // read the status again and print that.
    printf("stdio:");
    fflush(stdout);
    if (slurp("/proc/self/status", buf, sizeof buf) < 0) return 1;
    for (int i = 0; i < 5; ++i) printf(" %s=%ld", names[i], field(buf, names[i]));
    printf("\n");
    return 0;
  }
  for (int i = 0; i < 5; ++i) {
    put(i == 0 ? "" : " ");
    put(names[i]);
    put("=");
    put_long(field(buf, names[i]));
  }
  put("\n");
  if (argc > 2 && strcmp(argv[2], "smaps") == 0) {
    int fd = open("/proc/self/smaps", O_RDONLY);
    for (long n; fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0;) (void)!write(1, buf, (size_t)n);
    if (fd >= 0) close(fd);
  }
  return 0;
}
