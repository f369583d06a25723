/*
 * batch_threads.h: the threads of a compiled batch call (spbpe.c, mergebpe.c, unigram.c). Header-only.
 *
 * A batch call reads its texts with the GIL held, then, with it released, runs ``want`` workers: the calling thread
 * and want - 1 pthreads. Each worker takes the next text from a shared counter (batch_next) until none is left or
 * one has failed, so uneven texts even out without cutting the batch in advance; each keeps its own output and
 * records where each text's ids went, and the caller builds the lists once all are done.
 */
#ifndef TOK_BATCH_THREADS_H
#define TOK_BATCH_THREADS_H

#include <Python.h>
#include <pthread.h>

#define BATCH_MAX_THREADS 64
#define BATCH_BYTES_PER_THREAD 32768 /* a thread is worth starting for about this much text (code points) */

/* Workers for a batch of ``count`` texts of ``total`` code points on up to ``num_threads`` threads: 1..64. */
static inline long batch_threads_wanted(long num_threads, Py_ssize_t count, Py_ssize_t total)
{
    long want = num_threads < 1 ? 1 : num_threads > BATCH_MAX_THREADS ? BATCH_MAX_THREADS : num_threads;
    if (want > count)
        want = count > 0 ? (long)count : 1;
    if (want > total / BATCH_BYTES_PER_THREAD + 1)
        want = (long)(total / BATCH_BYTES_PER_THREAD + 1);
    return want;
}

/* A batch's texts as its workers share them: which worker's output holds text i's ids (who[i], from[i] to to[i]),
 * the counter they take texts from, and the first failure. */
typedef struct {
    int *who;
    Py_ssize_t *from, *to;
    Py_ssize_t count, next; /* next: atomic */
    int failed;             /* the first failure's code, 0 while there is none (atomic) */
} BatchTexts;

/* 0, or -1 when out of memory (nothing then to free). */
static int batch_texts_init(BatchTexts *b, Py_ssize_t count)
{
    size_t slots = (size_t)count + 1;
    b->who = (int *)malloc(slots * sizeof(int));
    b->from = (Py_ssize_t *)malloc(slots * sizeof(Py_ssize_t));
    b->to = (Py_ssize_t *)malloc(slots * sizeof(Py_ssize_t));
    b->count = count, b->next = 0, b->failed = 0;
    if (b->who && b->from && b->to)
        return 0;
    free(b->who), free(b->from), free(b->to);
    return -1;
}

static void batch_texts_free(BatchTexts *b)
{
    free(b->who), free(b->from), free(b->to);
}

/* The next text for a worker to encode, or -1 when there is none left or a worker has failed. */
static inline Py_ssize_t batch_next(BatchTexts *b)
{
    Py_ssize_t i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
    return i < b->count && !__atomic_load_n(&b->failed, __ATOMIC_RELAXED) ? i : -1;
}

/* Record a worker's failure code (non-zero; the first one wins). */
static inline void batch_fail(BatchTexts *b, int code)
{
    int none = 0;
    __atomic_compare_exchange_n(&b->failed, &none, code, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* Run worker(workers + k * size) for k < want: k = 0 on the calling thread, the others on pthreads, joined before
 * returning (call without the GIL). A pthread that cannot start leaves its share to the others. */
static void batch_threads_run(void *(*worker)(void *), void *workers, size_t size, long want)
{
    pthread_t threads[BATCH_MAX_THREADS];
    int started = 0;
    for (long k = 1; k < want && k < BATCH_MAX_THREADS; k++)
        if (pthread_create(&threads[started], NULL, worker, (char *)workers + (size_t)k * size) == 0)
            started++;
    worker(workers);
    for (int k = 0; k < started; k++)
        pthread_join(threads[k], NULL);
}

#endif /* TOK_BATCH_THREADS_H */
