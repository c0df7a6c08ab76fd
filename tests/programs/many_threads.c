/* argv[1] threads, one after another, each allocating and freeing one block: more threads than a
 * trace holds (tests/trace_test.py). */
#include <pthread.h>
#include <stdlib.h>

static void* work(void* arg) {
  (void)arg;
  void* volatile p = malloc(64);
  free(p);
  return NULL;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1;
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, work, NULL) != 0) return 1;
    pthread_join(t, NULL);
  }
  return 0;
}
