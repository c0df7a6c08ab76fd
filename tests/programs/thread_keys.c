/* 64 threads, each freeing a block in a pthread key's destructor when it ends: after the trace
 * recorder's own end-of-thread hook has run (tests/trace_test.py: 64 frees were lost so). */
#include <pthread.h>
#include <stdlib.h>

static pthread_key_t key;

static void* work(void* arg) {
  (void)arg;
  for (int i = 0; i < 100; ++i) {
    void* volatile p = malloc(64);
    free(p);
  }
  pthread_setspecific(key, malloc(100));
  return NULL;
}

int main(void) {
  pthread_key_create(&key, free);
  pthread_t t[64];
  for (int i = 0; i < 64; ++i) pthread_create(&t[i], NULL, work, NULL);
  for (int i = 0; i < 64; ++i) pthread_join(t[i], NULL);
  return 0;
}
