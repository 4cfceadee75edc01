/* core/mem: every thread allocates from the one main arena after mem_single_arena(), blocks
 * of 16 KiB and more are mapped on their own, and
 * mem_release_free() gives freed heap pages that sit below live blocks back to the kernel
 * (glibc's free() only trims the top of the heap, and only past 128 KiB). One process per
 * case: the arena policy is process-wide. A sanitizer build replaces malloc (SKIP). */
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "core/macro.h"
#include "core/mem.h"
#include "tests/common/check.h"
#include "tests/common/cases.h"

int test_failures;

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED true
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED true
#endif
#endif
#ifndef SANITIZED
#define SANITIZED false
#endif

/* malloc_info() writes one <heap nr="N"> element per arena. */
static int arena_count(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return -1;
    malloc_info(0, f);
    fclose(f);
    int n = 0;
    for (const char *p = buf; (p = strstr(p, "<heap nr=")); p++)
        n++;
    free(buf);
    return n;
}

/* The block is handed back to the joining thread, so the compiler cannot drop the pair. */
static void *thread_allocates(void *arg)
{
    (void)arg;
    char *p = xmalloc(64);
    memset(p, 1, 64);
    return p;
}

/* Rss of the [heap] mapping (brk heap), KiB. */
static long heap_rss_kib(void)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    char line[512];
    bool in_heap = false;
    long kib = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
            in_heap = strstr(line, "[heap]") != NULL;
        else if (in_heap && sscanf(line, "Rss: %ld kB", &kib) == 1)
            break;
    }
    fclose(f);
    return kib;
}

static void test_single_arena(bool policy)
{
    pthread_t t;
    if (policy)
        mem_single_arena();
    void *main_block = malloc(64); /* the main arena exists */
    void *thread_block = NULL;
    CHECK(pthread_create(&t, NULL, thread_allocates, NULL) == 0);
    CHECK(pthread_join(t, &thread_block) == 0);
    int n = arena_count();
    free(thread_block);
    if (policy)
        CHECK(n == 1);
    else
        CHECK(n == 2); /* glibc's default, which the case above must differ from */
    if ((policy && n != 1) || (!policy && n != 2))
        fprintf(stderr, "arenas after a second thread allocated: %d\n", n);
    free(main_block);
}

/* A block of 16 KiB and more (an mbedtls record buffer, an nghttp2 frame buffer) gets a
 * mapping of its own, not spare heap: glibc's default carves it from the 128 KiB of top
 * padding every heap extension adds. */
static void test_large_blocks(bool policy)
{
    if (policy)
        mem_single_arena();
    void *small = xmalloc(64); /* the heap exists, with its spare top unless the policy */
    size_t before = mallinfo2().hblks;
    void *big = xcalloc(1, 16 * 1024 + 333);
    size_t after = mallinfo2().hblks;
    if (policy)
        CHECK(after == before + 1);
    else
        CHECK(after == before); /* glibc's default, which the case above must differ from */
    if (after != before + (policy ? 1 : 0))
        fprintf(stderr, "mapped blocks %zu -> %zu after a 16.3 KiB calloc\n", before, after);
    free(big);
    free(small);
}

static void test_release_free(void)
{
    enum { N = 4096, SIZE = 96 }; /* ~ 400 KiB of small blocks, the way parsers allocate */
    static void *blocks[N];
    for (size_t i = 0; i < N; i++) {
        blocks[i] = xmalloc(SIZE);
        memset(blocks[i], 0xa5, SIZE);
    }
    void *pin = xmalloc(SIZE); /* a live block above them: free() cannot trim the top */
    for (size_t i = 0; i < N; i++)
        free(blocks[i]);
    long before = heap_rss_kib();
    mem_release_free();
    long after = heap_rss_kib();
    CHECK(before > 0 && after >= 0);
    /* Most of the ~400 KiB went back; what stays is the pages the free chunks' headers
     * and the live blocks share. */
    CHECK(before - after >= 256);
    if (before - after < 256)
        fprintf(stderr, "heap Rss %ld KiB -> %ld KiB after mem_release_free()\n", before, after);
    free(pin);
}

static void case_single_arena(void) { test_single_arena(true); }
static void case_default_arenas(void) { test_single_arena(false); }
static void case_large_mapped(void) { test_large_blocks(true); }
static void case_large_default(void) { test_large_blocks(false); }

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        { "single-arena", case_single_arena },
        { "default-arenas", case_default_arenas },
        { "release-free", test_release_free },
        { "large-mapped", case_large_mapped },
        { "large-default", case_large_default },
    };
    if (SANITIZED) {
        fprintf(stderr, "SKIP: a sanitizer build replaces malloc\n");
        return 77;
    }
    if (argc < 2) {
        /* Each case changes the process's heap policy: one per process. */
        fprintf(stderr, "usage: test-mem <case>\n");
        return 2;
    }
    return test_cases_run(argc, argv, cases, ELEMENTSOF(cases));
}
