/* What a futex wake of a sleeping thread costs the thread that wakes it (experiment 085):
 * every request handed to a parked reader or writer pays this on the JS thread.
 *   gcc -O2 -o /tmp/futex-wake bench/experiments/futex-wake.c -lpthread && /tmp/futex-wake
 * The sleeper parks on a futex; each round the main thread sleeps 1 ms (so the sleeper has
 * almost surely parked), sets the word and times the FUTEX_WAKE call. The time includes any
 * preemption of the waker by the thread it woke. Wakes that found no waiter, and failed
 * calls, are counted and left out. Linux only. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 2000

static atomic_int word;
static atomic_int running = 1;

static long futex(atomic_int *addr, int op, int val) {
  return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

static void *sleeper(void *arg) {
  (void)arg;
  while (atomic_load(&running)) {
    while (atomic_load(&word) == 0) futex(&word, FUTEX_WAIT_PRIVATE, 0);
    atomic_store(&word, 0);
  }
  return NULL;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(void) {
  static double took[ROUNDS];
  pthread_t thread;
  if (pthread_create(&thread, NULL, sleeper, NULL) != 0) {
    printf("pthread_create failed\n");
    return 1;
  }
  double sum = 0;
  int n = 0, missed = 0, failed = 0;
  for (int i = 0; i < ROUNDS; i++) {
    usleep(1000);
    atomic_store(&word, 1);
    double t0 = now_us();
    long woken = futex(&word, FUTEX_WAKE_PRIVATE, 1);
    double t = now_us() - t0;
    if (woken < 0) {
      failed++;
      continue;
    }
    if (woken == 0) {
      missed++;
      continue;
    }
    took[n++] = t;
    sum += t;
  }
  if (n == 0) {
    printf("no wake found a waiter\n");
    return 1;
  }
  qsort(took, n, sizeof took[0], by_value);
  double median = n % 2 == 1 ? took[n / 2] : (took[n / 2 - 1] + took[n / 2]) / 2;
  printf("futex wake of a sleeping thread: mean %.1f us, median %.1f us, p90 %.1f us\n", sum / n, median,
         took[n * 9 / 10]);
  printf("%d wakes timed; %d found no waiter; %d calls failed\n", n, missed, failed);
  atomic_store(&running, 0);
  atomic_store(&word, 1);
  futex(&word, FUTEX_WAKE_PRIVATE, 1);
  pthread_join(thread, NULL);
  return 0;
}
